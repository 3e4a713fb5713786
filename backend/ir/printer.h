// PrintProgram: Program to the canonical text of the loop-nest language. ParseProgram reads it
// back to an equal Program (tests/backend/ir/printer_test.cc checks this over every dataset).
#ifndef LOOPTOOL_BACKEND_IR_PRINTER_H_
#define LOOPTOOL_BACKEND_IR_PRINTER_H_

#include <string>

#include "backend/ir/program.h"

namespace looptool {

// One line per statement, then one line of sizes in variable order, each line ending in '\n':
// "C[m, n] += A[m, k] * B[k, n]\nm=112 n=208 k=256\n".
std::string PrintProgram(const Program& program);

// "C[m, n + 64]", "I[2*r + kr, c]": one access as the language writes it.
std::string PrintAccess(const Program& program, const Access& access);

// "C[m, n] += A[m, k] * B[k, n] -> relu": one statement, no line end.
std::string PrintStatement(const Program& program, const Statement& statement);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_PRINTER_H_
