// Test helpers: compile a schedule, run it and the reference interpreter on the same random
// inputs, and compare every output element.
#ifndef LOOPTOOL_TESTS_BACKEND_CODEGEN_JIT_CHECK_H_
#define LOOPTOOL_TESTS_BACKEND_CODEGEN_JIT_CHECK_H_

#include <random>
#include <string>
#include <vector>

#include "backend/codegen/codegen_options.h"
#include "backend/codegen/isa.h"
#include "backend/schedule/loop_tree.h"

namespace looptool::testing {

// The ISAs this host runs, best first.
std::vector<Isa> HostIsas();

LoopTree InitialTree(const std::string& program);
// Applies loop_tool action names ("split_4, down, ...") that must all have an effect.
LoopTree WithActions(const LoopTree& tree, const std::string& actions);

// The hand schedule of a 128^3 matmul (a 4 x 64 block of C in registers, k' outside it):
// WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=128 n=128 k=128"), kHandMatmul).
inline constexpr char kHandMatmul[] =
    "split_4, down, down, split_64, swap_up, swap_up, down, down, swap_down, down, split_64, "
    "swap_up, swap_up";

// `length` actions drawn uniformly among those loop_nest allows at each step (ActionMask; fewer
// when none is allowed), each of which must change the tree; adds the number applied to
// `*applied` when given.
LoopTree RandomLoopNestSchedule(const LoopTree& initial, int length, std::mt19937& rng,
                                int* applied = nullptr);

// "" when the JIT kernel of `tree` for `isa` computes exactly what the interpreter computes on
// small-integer inputs (and, with `real_inputs`, within 1e-4 relative on uniform inputs);
// otherwise a description of the first mismatch.
// With `negative_inputs`, every input is shifted to [-5, -1] first (max reductions must then
// never see a lane that was not loaded). The kernel runs twice, each tensor alone between
// inaccessible pages, first with its last element and then with its first against one: a read
// or write of one float outside a tensor kills the test, printing the schedule. With `options`
// that stream stores, a third run starts every tensor one float in (no base aligned).
std::string CompareWithInterpreter(const LoopTree& tree, Isa isa, bool real_inputs = false,
                                   bool negative_inputs = false,
                                   const CodegenOptions& options = {});

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_BACKEND_CODEGEN_JIT_CHECK_H_
