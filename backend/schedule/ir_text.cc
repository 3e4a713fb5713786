#include "backend/schedule/ir_text.h"

#include "absl/strings/str_cat.h"
#include "backend/ir/lexer.h"
#include "backend/ir/parser.h"
#include "backend/ir/printer.h"
#include "util/status_macros.h"

namespace looptool {
namespace {

std::string OrderText(const Program& p, const LoopOrder& order) {
  std::string out;
  for (const Loop& l : order) {
    absl::StrAppend(&out, " ", p.var(l.var).name, "(", l.size);
    if (l.tail) absl::StrAppend(&out, " r ", l.tail);
    if (l.unroll) absl::StrAppend(&out, " unroll");
    if (l.vectorize) absl::StrAppend(&out, " vectorize");
    out += ")";
  }
  return out;
}

absl::StatusOr<LoopOrder> ParseOrder(TokenStream& ts, const Program& p) {
  LoopOrder order;
  while (ts.Peek().kind == Token::Kind::kIdent) {
    const Token name = ts.Next();
    Loop l;
    l.var = -1;
    for (int v = 0; v < static_cast<int>(p.vars().size()); ++v) {
      if (p.var(v).name == name.text) l.var = v;
    }
    if (l.var < 0) {
      return TokenStream::ErrorAt(name, absl::StrCat("'", name.text, "' is not an index variable"));
    }
    RETURN_IF_ERROR(ts.ExpectPunct("("));
    ASSIGN_OR_RETURN(l.size, ts.ExpectInt("a loop size"));
    if (ts.PeekIdent("r")) {
      ts.Next();
      ASSIGN_OR_RETURN(l.tail, ts.ExpectInt("a tail after 'r'"));
    }
    while (ts.PeekIdent("unroll") || ts.PeekIdent("vectorize")) {
      (ts.Next().text == "unroll" ? l.unroll : l.vectorize) = true;
    }
    RETURN_IF_ERROR(ts.ExpectPunct(")"));
    order.push_back(l);
  }
  RETURN_IF_ERROR(ts.ExpectEndOfLine());
  return order;
}

}  // namespace

std::string PrintIr(const LoopTree& tree) {
  std::string out = PrintProgram(tree.program());
  absl::StrAppend(&out, ScheduleKey(tree), "cursor ", tree.cursor().statement + 1, " ",
                  tree.cursor().depth + 1, "\n");
  return out;
}

std::string ScheduleKey(const LoopTree& tree) {
  std::string out;
  for (int s = 0; s < tree.program().num_statements(); ++s) {
    absl::StrAppend(&out, "compute ", s + 1, ":", OrderText(tree.program(), tree.schedule(s).compute),
                    "\nwrite ", s + 1, ":", OrderText(tree.program(), tree.schedule(s).write), "\n");
    if (tree.schedule(s).stream) absl::StrAppend(&out, "stream ", s + 1, "\n");
    if (tree.schedule(s).fold) absl::StrAppend(&out, "fold ", s + 1, "\n");
  }
  return out;
}

absl::StatusOr<LoopTree> ParseIr(absl::string_view text, const Limits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_program_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program text has ", text.size(), " bytes; the limit is ", limits.max_program_bytes));
  }
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  TokenStream ts(std::move(tokens));
  ASSIGN_OR_RETURN(Program program, ParseProgramLines(ts, limits));
  auto shared = std::make_shared<const Program>(std::move(program));
  LoopTree initial = LoopTree::Initial(shared);
  std::vector<StatementSchedule> schedules = initial.schedules();
  Cursor cursor;
  while (!ts.AtEnd()) {
    const Token keyword = ts.Next();
    if (keyword.text != "compute" && keyword.text != "write" && keyword.text != "cursor" &&
        keyword.text != "stream" && keyword.text != "fold") {
      return TokenStream::Expected(keyword, "'compute', 'write', 'stream', 'fold' or 'cursor'");
    }
    const Token number = ts.Peek();
    ASSIGN_OR_RETURN(int64_t stmt, ts.ExpectInt("a statement number"));
    if (stmt < 1 || stmt > shared->num_statements()) {
      return TokenStream::ErrorAt(number, absl::StrCat("there is no statement ", stmt));
    }
    if (keyword.text == "cursor") {
      const Token loop = ts.Peek();
      ASSIGN_OR_RETURN(int64_t depth, ts.ExpectInt("a loop number"));
      if (depth < 1 || depth > limits.max_loops) {  // before the narrowing to int
        return TokenStream::ErrorAt(loop, absl::StrCat("there is no loop ", depth));
      }
      cursor = {static_cast<int>(stmt - 1), static_cast<int>(depth - 1)};
      RETURN_IF_ERROR(ts.ExpectEndOfLine());
    } else if (keyword.text == "stream" || keyword.text == "fold") {
      (keyword.text == "stream" ? schedules[stmt - 1].stream : schedules[stmt - 1].fold) = true;
      RETURN_IF_ERROR(ts.ExpectEndOfLine());
    } else {
      RETURN_IF_ERROR(ts.ExpectPunct(":"));
      ASSIGN_OR_RETURN(LoopOrder order, ParseOrder(ts, *shared));
      (keyword.text == "compute" ? schedules[stmt - 1].compute : schedules[stmt - 1].write) =
          std::move(order);
    }
    ts.SkipEndOfLines();
  }
  ASSIGN_OR_RETURN(LoopTree tree, LoopTree::Create(shared, std::move(schedules), cursor));
  if (tree.num_loops() > limits.max_loops) {
    return absl::InvalidArgumentError(absl::StrCat("the loop tree has ", tree.num_loops(),
                                                   " loops; the limit is ", limits.max_loops));
  }
  return tree;
}

}  // namespace looptool
