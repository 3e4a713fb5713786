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

TEST(ClientTokens, NamesAndTokensOneClientPerLine) {
  const absl::StatusOr<std::vector<ClientToken>> tokens =
      ParseClientTokens("# who may use this server\n\nalice s3cret-a\r\n  bob\t tok/b=  \n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "alice");
  EXPECT_EQ((*tokens)[0].token, "s3cret-a");
  EXPECT_EQ((*tokens)[1].name, "bob");
  EXPECT_EQ((*tokens)[1].token, "tok/b=");
}

TEST(ClientTokens, EveryBrokenLineIsNamed) {
  const auto message = [](const char* text) {
    return std::string(ParseClientTokens(text).status().message());
  };
  EXPECT_EQ(message(""), "it names no client ('<name> <token>' lines)");
  EXPECT_EQ(message("# only a comment\n"), "it names no client ('<name> <token>' lines)");
  EXPECT_EQ(message("alice\n"), "line 1 (client alice): its first line holds no token");
  EXPECT_EQ(message("alice a b\n"),
            "line 1 (client alice): its token holds the character 0x20; a token is visible "
            "ASCII (0x21-0x7e) only");
  EXPECT_EQ(message("ok t1\nal:ice t2\n"),
            "line 2: a client's name is 1-64 of A-Z a-z 0-9 _ . @ -, got 'al:ice'");
  EXPECT_EQ(message("alice t1\nalice t2\n"), "line 2: client alice is named twice");
  EXPECT_EQ(message("alice t1\nbob t1\n"), "line 2 (client bob): its token is another client's");
  const std::string dir = ::testing::TempDir();
  const std::string bad = dir + "/bad_clients";
  std::ofstream(bad) << "alice\n";
  EXPECT_EQ(ReadClientTokensFile(bad).status().message(),
            "the client tokens file " + bad +
                " is unusable: line 1 (client alice): its first line holds no token");
}

}  // namespace
}  // namespace looptool
