#include "backend/ir/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace looptool {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string Describe(const Token& t) {
  switch (t.kind) {
    case Token::Kind::kIdent:
      return absl::StrCat("'", t.text, "'");
    case Token::Kind::kInt:
      return absl::StrCat("'", t.text, "'");
    case Token::Kind::kPunct:
      return absl::StrCat("'", t.text, "'");
    case Token::Kind::kEndOfLine:
      return "end of line";
    case Token::Kind::kEnd:
      return "end of input";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view text) {
  std::vector<Token> out;
  int line = 1, column = 1;
  size_t i = 0;
  auto push_eol = [&](int l, int c) {
    if (!out.empty() && out.back().kind != Token::Kind::kEndOfLine) {
      out.push_back({Token::Kind::kEndOfLine, "", 0, l, c});
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n' || c == ';') {
      push_eol(line, column);
      ++i;
      if (c == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      ++column;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i, ++column;
      continue;
    }
    Token t{Token::Kind::kPunct, "", 0, line, column};
    if (IsIdentStart(c)) {
      size_t j = i;
      while (j < text.size() && IsIdentChar(text[j])) ++j;
      t.kind = Token::Kind::kIdent;
      t.text = std::string(text.substr(i, j - i));
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      int64_t v = 0;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
        if (v > (int64_t{1} << 58)) {
          return absl::InvalidArgumentError(
              absl::StrCat("line ", line, ", column ", column, ": integer is too large"));
        }
        v = v * 10 + (text[j] - '0');
        ++j;
      }
      if (j < text.size() && IsIdentStart(text[j])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", line, ", column ", column + static_cast<int>(j - i),
            ": expected a separator after the number, found '", std::string(1, text[j]), "'"));
      }
      t.kind = Token::Kind::kInt;
      t.text = std::string(text.substr(i, j - i));
      t.value = v;
    } else {
      static constexpr absl::string_view kTwoChar[] = {"+=", "->"};
      static constexpr absl::string_view kOneChar = "[],+*=():";
      absl::string_view rest = text.substr(i);
      for (absl::string_view p : kTwoChar) {
        if (rest.substr(0, p.size()) == p) t.text = std::string(p);
      }
      if (t.text.empty() && kOneChar.find(c) != absl::string_view::npos) t.text = std::string(1, c);
      if (t.text.empty()) {
        const std::string shown =
            std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c)
                                                        : absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c)));
        return absl::InvalidArgumentError(absl::StrCat("line ", line, ", column ", column,
                                                       ": unexpected character '", shown, "'"));
      }
    }
    const size_t len = t.text.size();
    i += len;
    column += static_cast<int>(len);
    out.push_back(std::move(t));
  }
  push_eol(line, column);
  out.push_back({Token::Kind::kEnd, "", 0, line, column});
  return out;
}

const Token& TokenStream::Peek(int ahead) const {
  const size_t p = std::min(pos_ + ahead, tokens_.size() - 1);
  return tokens_[p];
}

const Token& TokenStream::Next() {
  const Token& t = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool TokenStream::PeekPunct(absl::string_view p, int ahead) const {
  const Token& t = Peek(ahead);
  return t.kind == Token::Kind::kPunct && t.text == p;
}

bool TokenStream::PeekIdent(absl::string_view name) const {
  const Token& t = Peek();
  return t.kind == Token::Kind::kIdent && t.text == name;
}

absl::Status TokenStream::Expected(const Token& at, absl::string_view what) {
  return ErrorAt(at, absl::StrCat("expected ", what, ", found ", Describe(at)));
}

absl::Status TokenStream::ErrorAt(const Token& at, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("line ", at.line, ", column ", at.column, ": ", message));
}

absl::Status TokenStream::ExpectPunct(absl::string_view p) {
  if (!PeekPunct(p)) return Expected(Peek(), absl::StrCat("'", p, "'"));
  Next();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenStream::ExpectIdent(absl::string_view what) {
  if (Peek().kind != Token::Kind::kIdent) return Expected(Peek(), what);
  return Next().text;
}

absl::StatusOr<int64_t> TokenStream::ExpectInt(absl::string_view what) {
  if (Peek().kind != Token::Kind::kInt) return Expected(Peek(), what);
  return Next().value;
}

absl::Status TokenStream::ExpectEndOfLine() {
  const Token& t = Peek();
  if (t.kind == Token::Kind::kEnd) return absl::OkStatus();
  if (t.kind != Token::Kind::kEndOfLine) return Expected(t, "end of line");
  Next();
  return absl::OkStatus();
}

void TokenStream::SkipEndOfLines() {
  while (Peek().kind == Token::Kind::kEndOfLine) Next();
}

}  // namespace looptool
