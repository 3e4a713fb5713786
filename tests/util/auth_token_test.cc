// The token-file rule servers and clients share: first line, surrounding whitespace dropped,
// visible ASCII only; every refusal names the file and the reason.
#include "util/auth_token.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

using ::testing::HasSubstr;

TEST(AuthToken, FirstLineWithItsSurroundingWhitespaceDropped) {
  EXPECT_EQ(*ParseAuthToken("s3cret"), "s3cret");
  EXPECT_EQ(*ParseAuthToken("s3cret\n"), "s3cret");
  EXPECT_EQ(*ParseAuthToken("s3cret\r\n"), "s3cret");  // CRLF
  EXPECT_EQ(*ParseAuthToken("  \ts3cret \t\r\nsecond line\n"), "s3cret");
  EXPECT_EQ(*ParseAuthToken("a-b_c.d~e+f/g=h"), "a-b_c.d~e+f/g=h");
}

TEST(AuthToken, RefusesEmptyAndInvisibleCharacters) {
  EXPECT_EQ(ParseAuthToken("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAuthToken(" \r\n").status().message(), "its first line holds no token");
  EXPECT_EQ(ParseAuthToken("\nsecret").status().message(), "its first line holds no token");
  EXPECT_EQ(ParseAuthToken("sec ret").status().message(),
            "its token holds the character 0x20; a token is visible ASCII (0x21-0x7e) only");
  EXPECT_EQ(ParseAuthToken("sec\tret").status().message(),
            "its token holds the character 0x09; a token is visible ASCII (0x21-0x7e) only");
  EXPECT_EQ(ParseAuthToken("s\xc3\xa9").status().message(),
            "its token holds the character 0xc3; a token is visible ASCII (0x21-0x7e) only");
}

TEST(AuthToken, FilesAreNamedInErrors) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/good_token", bad = dir + "/bad_token";
  std::ofstream(good) << "tok3n\r\n";
  std::ofstream(bad) << "\n";
  EXPECT_EQ(*ReadAuthTokenFile(good), "tok3n");
  const absl::Status missing = ReadAuthTokenFile(dir + "/none").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), "cannot read the token file " + dir + "/none");
  EXPECT_THAT(ReadAuthTokenFile(bad).status().message(),
              HasSubstr("the token file " + bad + " is unusable: its first line holds no token"));
}

}  // namespace
}  // namespace looptool
