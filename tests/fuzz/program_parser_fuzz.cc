// ParseProgram on arbitrary text never crashes; a program it accepts prints to a text that parses
// back to an equal Program and prints to the same text again (the printer's round trip).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/ir/parser.h"
#include "backend/ir/printer.h"
#include "backend/ir/limits.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const looptool::Limits limits;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<looptool::Program> program = looptool::ParseProgram(text, limits);
  if (!program.ok()) {
    FUZZ_CHECK(program.status().code() == absl::StatusCode::kInvalidArgument,
               program.status().ToString());
    return 0;
  }
  const std::string printed = looptool::PrintProgram(*program);
  // The canonical text may be longer than the input; past the size cap a re-parse is refused
  // by design, so the round trip is only checked below it.
  if (static_cast<int64_t>(printed.size()) > limits.max_program_bytes) return 0;
  absl::StatusOr<looptool::Program> again = looptool::ParseProgram(printed, limits);
  FUZZ_CHECK(again.ok(), absl::StrCat("printed text does not parse: ", again.status().ToString(),
                                      "\n--- printed:\n", printed));
  FUZZ_CHECK(*again == *program, absl::StrCat("re-parsed program differs\n--- printed:\n", printed));
  const std::string reprinted = looptool::PrintProgram(*again);
  FUZZ_CHECK(reprinted == printed,
             absl::StrCat("printing is not stable\n--- printed:\n", printed, "--- reprinted:\n",
                          reprinted));
  return 0;
}
