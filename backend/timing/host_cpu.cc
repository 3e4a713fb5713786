#include "backend/timing/host_cpu.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace looptool {

std::string HostCpuModel(const std::string& cpuinfo_path) {
  std::ifstream in(cpuinfo_path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name =
        absl::StrJoin(absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace()), " ");
    if (!name.empty()) return name;
  }
  return "unknown CPU";
}

}  // namespace looptool
