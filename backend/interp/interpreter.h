// Interpret: the reference executor. Runs any schedule of any program exactly as the loop tree
// says, loop by loop, tails included, on plain float arrays: each statement reduces into an
// accumulator (0 for +=, -infinity for max=), and its write-back nest copies the accumulator to
// the output through the post-op. Obviously correct rather than fast; the JIT is checked
// against it.
#ifndef LOOPTOOL_BACKEND_INTERP_INTERPRETER_H_
#define LOOPTOOL_BACKEND_INTERP_INTERPRETER_H_

#include <cstdint>
#include <vector>

#include "backend/schedule/loop_tree.h"
#include "util/aligned_allocator.h"

namespace looptool {

// One row-major float array per tensor of a program, indexed by tensor id; each starts on a
// cache line, at a fixed place within its page (AllocateTensors).
using TensorBuffer = std::vector<float, CacheLineAllocator<float>>;
using TensorData = std::vector<TensorBuffer>;

// Arrays of the program's shapes, all zero.
TensorData AllocateTensors(const Program& program);

// Fills every input tensor from a seeded generator; outputs are left as they are. With
// `small_integers`, values are integers in [-2, 2], so every sum the program can form is exact
// in float whatever the order of summation (within the default caps); otherwise uniform in
// [-1, 1).
void FillInputs(const Program& program, uint64_t seed, bool small_integers, TensorData& data);

// How often each leaf ran at each point of its iteration space (tests use it to prove that a
// schedule visits every point exactly once). Indexed [statement][point], points row-major over
// Program::LoopVars (compute) and over the output variables (write).
struct VisitCounts {
  std::vector<std::vector<int>> compute;
  std::vector<std::vector<int>> write;
};

// Runs `tree`, overwriting the output tensors of `data`. REQUIRES: `data` has the program's
// shapes (AllocateTensors). When `counts` is given, it is filled as described above.
void Interpret(const LoopTree& tree, TensorData& data, VisitCounts* counts = nullptr);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_INTERP_INTERPRETER_H_
