#include "bench/report_files.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace looptool::bench {

absl::Status PrepareReportDirectory(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the report directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the report directory ", dir, ": ", ec.message()));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the report directory ", dir, " is not a directory"));
  }
  std::string probe = dir + "/.looptool-report-XXXXXX";
  const int fd = mkstemp(probe.data());
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create a file in the report directory ", dir, ": ", std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status PrepareReportFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("the report file's path is empty");
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  if (absl::Status s = PrepareReportDirectory(dir); !s.ok()) return s;
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the report file ", path, " is a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteReportFile(const std::string& path, absl::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the report file ", path, ": ", std::strerror(errno)));
  }
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) {
    return absl::FailedPreconditionError(absl::StrCat("cannot write the report file ", path));
  }
  return absl::OkStatus();
}

}  // namespace looptool::bench
