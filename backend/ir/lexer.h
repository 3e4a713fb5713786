// Lexer: splits LoopTool's program and schedule text into tokens that remember their line and
// column, so that every parse error can say where it happened and what was expected there.
#ifndef LOOPTOOL_BACKEND_IR_LEXER_H_
#define LOOPTOOL_BACKEND_IR_LEXER_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace looptool {

struct Token {
  enum class Kind { kIdent, kInt, kPunct, kEndOfLine, kEnd };
  Kind kind;
  std::string text;   // identifier, digits, or the punctuation itself ("+=", "->", "[")
  int64_t value = 0;  // for kInt
  int line = 1;       // 1-based
  int column = 1;     // 1-based
};

// Tokenizes `text`. `;` ends a line like a newline; `#` starts a comment that runs to the end of
// the line. Consecutive line ends collapse into one kEndOfLine; the list ends with kEnd.
// Returns INVALID_ARGUMENT naming line and column for a character outside the language or an
// integer that does not fit in 62 bits.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view text);

// A cursor over tokens with the error helpers every parser here uses.
class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& Peek(int ahead = 0) const;
  const Token& Next();
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  bool PeekPunct(absl::string_view p, int ahead = 0) const;
  bool PeekIdent(absl::string_view name) const;

  // Consumes the expected token or returns "line L, column C: expected <what>, found <token>".
  absl::Status ExpectPunct(absl::string_view p);
  absl::StatusOr<std::string> ExpectIdent(absl::string_view what);
  absl::StatusOr<int64_t> ExpectInt(absl::string_view what);
  absl::Status ExpectEndOfLine();
  void SkipEndOfLines();

  // INVALID_ARGUMENT "line L, column C: expected <what>, found <description of `at`>".
  static absl::Status Expected(const Token& at, absl::string_view what);
  // INVALID_ARGUMENT "line L, column C: <message>".
  static absl::Status ErrorAt(const Token& at, absl::string_view message);

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_LEXER_H_
