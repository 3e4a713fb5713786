// Where benchmark programs put their reports. A benchmark runs for minutes before it writes
// anything, so its output path is checked first: PrepareReport* before the run, WriteReportFile
// after it, and a path that cannot be written is an error the program reports and exits on,
// never a report silently lost.
#ifndef LOOPTOOL_BENCH_REPORT_FILES_H_
#define LOOPTOOL_BENCH_REPORT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace looptool::bench {

// Creates `dir` and its missing parents, then checks that a file can be created in it (a
// temporary one, removed again). FAILED_PRECONDITION naming `dir` and the reason otherwise;
// INVALID_ARGUMENT for an empty `dir`.
absl::Status PrepareReportDirectory(const std::string& dir);

// PrepareReportDirectory for the directory `path` names a file in (the working directory for a
// bare name), then checks that `path` is not a directory. Leaves `path` itself untouched.
absl::Status PrepareReportFile(const std::string& path);

// Replaces the file at `path` with `text`. FAILED_PRECONDITION naming `path` when it cannot be
// opened or not all of `text` was written.
absl::Status WriteReportFile(const std::string& path, absl::string_view text);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_REPORT_FILES_H_
