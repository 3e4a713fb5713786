#include "backend/ir/parser.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace looptool {
namespace {

using Kind = Token::Kind;

// Accumulates names in order of first appearance while statements are parsed.
struct Names {
  std::vector<std::string> tensors;
  std::vector<std::string> vars;

  int Tensor(const std::string& name) { return IdOf(tensors, name); }
  int Var(const std::string& name) { return IdOf(vars, name); }

  static int IdOf(std::vector<std::string>& list, const std::string& name) {
    auto it = std::find(list.begin(), list.end(), name);
    if (it != list.end()) return static_cast<int>(it - list.begin());
    list.push_back(name);
    return static_cast<int>(list.size()) - 1;
  }
};

constexpr int64_t kMaxIndexConstant = int64_t{1} << 31;

absl::StatusOr<AffineIndex> ParseIndex(TokenStream& ts, Names& names) {
  AffineIndex idx;
  while (true) {
    const Token& t = ts.Peek();
    if (t.kind == Kind::kInt) {
      const Token& number = ts.Next();
      const int64_t c = number.value;
      // Bounded here so that sums of offsets cannot overflow; Program::Create applies the caps.
      if (c > kMaxIndexConstant || idx.offset > kMaxIndexConstant) {
        return TokenStream::Expected(number, "an index constant of at most 2^31");
      }
      if (ts.PeekPunct("*")) {
        ts.Next();
        ASSIGN_OR_RETURN(std::string v, ts.ExpectIdent("an index variable after '*'"));
        idx.terms.push_back({names.Var(v), c});
      } else {
        idx.offset += c;
      }
    } else if (t.kind == Kind::kIdent) {
      const int v = names.Var(ts.Next().text);
      int64_t c = 1;
      if (ts.PeekPunct("*")) {
        ts.Next();
        ASSIGN_OR_RETURN(c, ts.ExpectInt("an integer coefficient after '*'"));
      }
      idx.terms.push_back({v, c});
    } else {
      return TokenStream::Expected(t, "an index variable or an integer");
    }
    if (!ts.PeekPunct("+")) return idx;
    ts.Next();
  }
}

absl::StatusOr<Access> ParseAccess(TokenStream& ts, Names& names, absl::string_view what) {
  ASSIGN_OR_RETURN(std::string name, ts.ExpectIdent(what));
  Access acc;
  acc.tensor = names.Tensor(name);
  RETURN_IF_ERROR(ts.ExpectPunct("["));
  if (ts.PeekPunct("]")) {
    ts.Next();
    return acc;
  }
  while (true) {
    ASSIGN_OR_RETURN(AffineIndex idx, ParseIndex(ts, names));
    acc.index.push_back(std::move(idx));
    if (ts.PeekPunct("]")) {
      ts.Next();
      return acc;
    }
    if (!ts.PeekPunct(",")) return TokenStream::Expected(ts.Peek(), "',' or ']'");
    ts.Next();
  }
}

absl::StatusOr<Statement> ParseStatement(TokenStream& ts, Names& names) {
  Statement st;
  ASSIGN_OR_RETURN(st.output, ParseAccess(ts, names, "an output tensor"));
  if (ts.PeekPunct("=")) {
    st.reduction = Reduction::kAssign;
  } else if (ts.PeekPunct("+=")) {
    st.reduction = Reduction::kSum;
  } else if (ts.PeekIdent("max") && ts.PeekPunct("=", 1)) {
    st.reduction = Reduction::kMax;
    ts.Next();
  } else {
    return TokenStream::Expected(ts.Peek(), "'=', '+=' or 'max='");
  }
  ts.Next();
  ASSIGN_OR_RETURN(Access first, ParseAccess(ts, names, "an input tensor"));
  st.inputs.push_back(std::move(first));
  if (ts.PeekPunct("*") || ts.PeekPunct("+")) {
    st.combiner = ts.Next().text == "*" ? Combiner::kMultiply : Combiner::kAdd;
    ASSIGN_OR_RETURN(Access second, ParseAccess(ts, names, "an input tensor"));
    st.inputs.push_back(std::move(second));
    if (ts.PeekPunct("*") || ts.PeekPunct("+")) {
      return TokenStream::ErrorAt(ts.Peek(), "a statement combines at most two operands");
    }
  }
  if (ts.PeekPunct("->")) {
    ts.Next();
    const Token& t = ts.Peek();
    if (t.kind != Kind::kIdent || t.text != "relu") {
      return TokenStream::Expected(t, "a post-op ('relu')");
    }
    ts.Next();
    st.post_op = PostOp::kRelu;
  }
  RETURN_IF_ERROR(ts.ExpectEndOfLine());
  return st;
}

absl::Status ParseSizes(TokenStream& ts, std::map<std::string, std::pair<int64_t, Token>>& sizes) {
  while (true) {
    const Token name_tok = ts.Peek();
    ASSIGN_OR_RETURN(std::string name, ts.ExpectIdent("an index variable"));
    RETURN_IF_ERROR(ts.ExpectPunct("="));
    ASSIGN_OR_RETURN(int64_t extent, ts.ExpectInt(absl::StrCat("the size of '", name, "'")));
    if (!sizes.emplace(name, std::make_pair(extent, name_tok)).second) {
      return TokenStream::ErrorAt(name_tok, absl::StrCat("size of '", name, "' is given twice"));
    }
    if (ts.PeekPunct(",")) ts.Next();
    const Token& t = ts.Peek();
    if (t.kind == Kind::kEndOfLine || t.kind == Kind::kEnd) return ts.ExpectEndOfLine();
  }
}

}  // namespace

absl::StatusOr<Program> ParseProgramLines(TokenStream& ts, const Limits& limits) {
  Names names;
  std::vector<Statement> statements;
  std::map<std::string, std::pair<int64_t, Token>> sizes;
  const Token first = ts.Peek();
  ts.SkipEndOfLines();
  while (!ts.AtEnd()) {
    const Token& t = ts.Peek();
    if (t.kind == Kind::kIdent && ts.Peek(1).kind == Kind::kInt) break;  // a schedule line
    if (t.kind == Kind::kIdent && ts.PeekPunct("[", 1)) {
      ASSIGN_OR_RETURN(Statement st, ParseStatement(ts, names));
      statements.push_back(std::move(st));
    } else if (t.kind == Kind::kIdent && ts.PeekPunct("=", 1)) {
      RETURN_IF_ERROR(ParseSizes(ts, sizes));
    } else {
      return TokenStream::Expected(t, "a statement such as 'C[m, n] += A[m, k] * B[k, n]' or "
                                      "sizes such as 'm=64 n=64 k=64'");
    }
    ts.SkipEndOfLines();
  }
  if (statements.empty()) {
    return TokenStream::ErrorAt(first, "expected at least one statement");
  }
  std::vector<IndexVar> vars;
  for (const std::string& v : names.vars) {
    auto it = sizes.find(v);
    if (it == sizes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("index variable '", v, "' has no size (add ", v, "=<extent>)"));
    }
    vars.push_back({v, it->second.first});
  }
  for (const auto& [name, size_tok] : sizes) {
    if (std::find(names.vars.begin(), names.vars.end(), name) == names.vars.end()) {
      return TokenStream::ErrorAt(size_tok.second,
                                  absl::StrCat("size given for '", name,
                                               "', which no statement uses"));
    }
  }
  return Program::Create(std::move(vars), std::move(names.tensors), std::move(statements), limits);
}

absl::StatusOr<Program> ParseProgram(absl::string_view text, const Limits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_program_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the program text has ", text.size(),
                                                   " bytes; the limit is ",
                                                   limits.max_program_bytes));
  }
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  TokenStream ts(std::move(tokens));
  ASSIGN_OR_RETURN(Program p, ParseProgramLines(ts, limits));
  if (!ts.AtEnd()) return TokenStream::Expected(ts.Peek(), "a statement or sizes");
  return p;
}

}  // namespace looptool
