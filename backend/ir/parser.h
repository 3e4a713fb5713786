// ParseProgram: LoopTool's loop-nest language, text to Program.
//
// A program is one or more statements and a line of sizes, in any order; `;` separates lines
// and `#` starts a comment:
//
//   C[m, n] += A[m, k] * B[k, n]        # matmul
//   m=128 n=96 k=64
//
// statement := access ('=' | '+=' | 'max=') operand [('*' | '+') operand] ['->' 'relu']
// access    := NAME '[' [index {',' index}] ']'
// index     := term {'+' term}            term := INT | VAR | INT '*' VAR | VAR '*' INT
// sizes     := VAR '=' INT {[','] VAR '=' INT}
//
// Examples of every primitive are in datasets/ and tests/backend/ir/parser_test.cc.
#ifndef LOOPTOOL_BACKEND_IR_PARSER_H_
#define LOOPTOOL_BACKEND_IR_PARSER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "backend/ir/lexer.h"
#include "backend/ir/program.h"
#include "backend/ir/limits.h"

namespace looptool {

// Parses a whole program text. Errors are INVALID_ARGUMENT: syntax errors read
// "line L, column C: expected <what>, found <token>"; rule violations name what is wrong
// (see Program::Create). Text longer than limits.max_program_bytes is refused unread.
absl::StatusOr<Program> ParseProgram(absl::string_view text, const Limits& limits);

// Parses program lines from `tokens` up to the end or to the first line whose second token is an
// integer (a schedule line such as `compute 1: ...`), which is left unread.
absl::StatusOr<Program> ParseProgramLines(TokenStream& tokens, const Limits& limits);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_PARSER_H_
