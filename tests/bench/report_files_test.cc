#include "bench/report_files.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::bench {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string dir = ::testing::TempDir() + "/report_files_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(ReportFiles, PrepareCreatesMissingParentsAndLeavesNothingBehind) {
  const std::string dir = TempDir() + "/a/b";
  ASSERT_TRUE(PrepareReportDirectory(dir).ok());
  ASSERT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the probe file is removed
  EXPECT_TRUE(PrepareReportDirectory(dir).ok());  // an existing directory is fine
}

TEST(ReportFiles, PrepareRefusesAPathUnderAFile) {
  const std::string dir = TempDir();
  ASSERT_TRUE(WriteReportFile(dir + "/file", "x").ok());
  const absl::Status s = PrepareReportDirectory(dir + "/file/sub");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(dir + "/file/sub"));
  const absl::Status f = PrepareReportDirectory(dir + "/file");
  EXPECT_EQ(f.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(f.message(), HasSubstr(dir + "/file: "));
  EXPECT_EQ(PrepareReportDirectory("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReportFiles, PrepareFileCreatesItsDirectoryButNotTheFile) {
  const std::string dir = TempDir();
  const std::string path = dir + "/new/report.md";
  ASSERT_TRUE(PrepareReportFile(path).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/new"));
  EXPECT_FALSE(std::filesystem::exists(path));
  const absl::Status s = PrepareReportFile(dir + "/new");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is a directory"));
}

TEST(ReportFiles, WriteReplacesTheWholeFile) {
  const std::string path = TempDir() + "/r.md";
  ASSERT_TRUE(WriteReportFile(path, "a longer first report\n").ok());
  const std::string text("second\0report", 13);  // bytes as given, NULs included
  ASSERT_TRUE(WriteReportFile(path, text).ok());
  EXPECT_EQ(Read(path), text);
}

TEST(ReportFiles, WriteIntoAMissingDirectoryFailsNamingThePath) {
  const std::string path = TempDir() + "/missing/r.md";
  const absl::Status s = WriteReportFile(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(path));
}

}  // namespace
}  // namespace looptool::bench
