// reference_bench: what a program's first measurement pays before its first kernel is timed,
// the reference run every kernel is verified against (MakeReference: seeded inputs, the untiled
// nest interpreted once per program). A search on a program the server has not seen (or no
// longer caches) waits for it, so it bounds how fast `--search=policy` can answer a new layer.
//
//   bazel build //bench:reference_bench
//   bazel-bin/bench/reference_bench --datasets=resnet18-v0,mobilenet_v2-v0,bert_base-v0
//   files=$(ls bench/rl/programs/large_memory/*.txt | paste -sd,)
//   bazel-bin/bench/reference_bench --datasets= --files="$files"
//
// Prints a markdown table per dataset (seconds per program, best of --repeats, and the
// interpreter's GFLOPS over the program's flop count) and a summary line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "backend/codegen/verify.h"
#include "backend/ir/parser.h"
#include "datasets/registry.h"
#include "util/status_macros.h"

ABSL_FLAG(std::string, datasets,
          "resnet18-v0,mobilenet_v2-v0,bert_base-v0,conv2d-v0,pool-v0,reduce-v0,transpose-v0,"
          "elementwise-v0",
          "comma-separated datasets whose every benchmark is timed");
ABSL_FLAG(std::vector<std::string>, files, {},
          "comma-separated program files (the IR text `looptool tune --benchmark=FILE` reads), "
          "timed after the datasets");
ABSL_FLAG(int, repeats, 2, "runs per program, the fastest reported (1..100)");

namespace looptool {
namespace {

double Seconds(const Program& program) {
  const auto start = std::chrono::steady_clock::now();
  const ReferenceRun ref = MakeReference(program);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One section of the table: its title and its programs (name, IR text; nullopt: unreadable).
struct Section {
  std::string title;
  std::vector<std::pair<std::string, std::optional<std::string>>> programs;
};

absl::StatusOr<std::vector<Section>> Sections() {
  std::vector<Section> sections;
  const std::vector<std::string> names =
      absl::StrSplit(absl::GetFlag(FLAGS_datasets), ',', absl::SkipEmpty());
  for (const std::string& dataset : names) {
    ASSIGN_OR_RETURN(const std::vector<std::string> uris,
                     datasets::BenchmarkUris(dataset, datasets::Split::kAll));
    Section& section = sections.emplace_back(Section{dataset, {}});
    for (const std::string& uri : uris) {
      section.programs.emplace_back(uri, datasets::ResolveUri(uri));
    }
  }
  const std::vector<std::string> files = absl::GetFlag(FLAGS_files);
  if (!files.empty()) {
    Section& section = sections.emplace_back(Section{"files", {}});
    for (const std::string& file : files) {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      section.programs.emplace_back(
          file, in ? std::optional<std::string>(text.str()) : std::nullopt);
    }
  }
  return sections;
}

int Main() {
  const int repeats = absl::GetFlag(FLAGS_repeats);
  if (repeats < 1 || repeats > 100) {
    std::fprintf(stderr, "--repeats must be 1..100, not %d\n", repeats);
    return 1;
  }
  const absl::StatusOr<std::vector<Section>> sections = Sections();
  if (!sections.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sections.status().message()).c_str());
    return 1;
  }
  double total = 0, worst = 0;
  std::string worst_name;
  int programs = 0;
  for (const Section& section : *sections) {
    std::printf("\n## %s\n\n| program | MFLOP | reference s | interpreter GFLOPS |\n"
                "|---|---:|---:|---:|\n",
                section.title.c_str());
    for (const auto& [name, text] : section.programs) {
      absl::StatusOr<Program> program =
          text.has_value() ? ParseProgram(*text, Limits{})
                           : absl::StatusOr<Program>(absl::NotFoundError("cannot be read"));
      if (!program.ok()) {
        std::printf("| %s | - | %s | - |\n", name.c_str(),
                    std::string(program.status().message()).c_str());
        continue;
      }
      double best = 1e30;
      for (int r = 0; r < repeats; ++r) best = std::min(best, Seconds(*program));
      const double flops = static_cast<double>(program->Flops());
      std::printf("| %s | %.1f | %.4f | %.2f |\n", name.substr(name.rfind('/') + 1).c_str(),
                  flops * 1e-6, best, flops / best * 1e-9);
      std::fflush(stdout);
      total += best;
      ++programs;
      if (best > worst) {
        worst = best;
        worst_name = name;
      }
    }
  }
  std::printf("\n%d programs: reference runs %.3f s in all, mean %.4f s, longest %.4f s (%s)\n",
              programs, total, programs > 0 ? total / programs : 0.0, worst, worst_name.c_str());
  return 0;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {  // a shell's glob after --files= leaves every file but the first here
    std::fprintf(stderr, "unexpected argument %s (--files takes a comma-separated list)\n",
                 rest[1]);
    return 1;
  }
  return looptool::Main();
}
