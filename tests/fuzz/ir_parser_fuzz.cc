// ParseIr on arbitrary text never crashes; a tree it accepts has at most limits.max_loops loops
// and satisfies ParseIr(PrintIr(tree)) == tree (the `ir` observation's round trip).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const looptool::Limits limits;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<looptool::LoopTree> tree = looptool::ParseIr(text, limits);
  if (!tree.ok()) {
    FUZZ_CHECK(tree.status().code() == absl::StatusCode::kInvalidArgument,
               tree.status().ToString());
    return 0;
  }
  FUZZ_CHECK(tree->num_loops() <= limits.max_loops,
             absl::StrCat("tree has ", tree->num_loops(), " loops"));
  const std::string printed = looptool::PrintIr(*tree);
  // Past the size cap a re-parse is refused by design; check the round trip below it.
  if (static_cast<int64_t>(printed.size()) > limits.max_program_bytes) return 0;
  absl::StatusOr<looptool::LoopTree> again = looptool::ParseIr(printed, limits);
  FUZZ_CHECK(again.ok(), absl::StrCat("PrintIr text does not parse: ", again.status().ToString(),
                                      "\n--- printed:\n", printed));
  FUZZ_CHECK(*again == *tree, absl::StrCat("ParseIr(PrintIr(tree)) != tree\n--- printed:\n",
                                           printed, "--- reprinted:\n", looptool::PrintIr(*again)));
  return 0;
}
