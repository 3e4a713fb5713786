// Sketches: LoopNest-style starting schedules, as loop_nest actions a search can start from.
// After LoopNest's code-generation design (a vectorized innermost loop, a register block of
// rows x vectors, the reductions around the block, cache tiles outside) and Ansor's sketches
// (rules generate the structure, measurement picks the sizes): a search that starts from these
// is a few mutations from library speed instead of 8-10 exact actions.
#ifndef LOOPTOOL_BACKEND_ACTIONS_SKETCHES_H_
#define LOOPTOOL_BACKEND_ACTIONS_SKETCHES_H_

#include <string>
#include <vector>

#include "backend/actions/action.h"
#include "backend/codegen/isa.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"

namespace looptool {

// One starting schedule: the loop_nest actions (level pointers) that build it from the tree
// it was made for, each of which applies in turn.
struct Sketch {
  std::string description;  // "rows m/4, vector n/64, reduction k/64"
  std::vector<Action> actions;
  int accumulators = 0;     // the register block's vector registers (rows x vectors)
};

struct SketchOptions {
  Isa target = Isa::kAvx512;  // sizes vectors (its lanes) and blocks (its RegisterBudget)
  int max_sketches = 16;
};

// Up to `options.max_sketches` sketches for `tree`'s costliest statement (most flops), best first
// by a static prior, each reaching a distinct tree. None unless:
//   1) that statement's compute nest is untiled (one loop per variable);
//   2) its output's last index variable v steps by 1 in the output and by 1 to 4 (a strided
//      load: a convolution's or pooling's stride, not a transpose's) in every input that reads
//      it;
//   3) the block fits the code generator's register budget for the statement
//      (backend/codegen/register_budget.h): rows * ceil(v's block / lanes) accumulators at most
//      its accumulators; with a second row variable x (below), rows * x's extent * vectors
//      accumulators, plus x's extent * vectors input vectors and a broadcast, at most that. So
//      the kernel planned for a sketch's tree holds at least the block in registers (its register
//      scope may start further out where an enclosing tile's iterations fit too, a split that
//      leaves one block and a tail: the planner then unrolls that tile around the block).
// Each sketch orders the nest, outer to inner: the outer tile of the largest reduction variable
// (when tiled), the outer tiles of the row variable u and of v, the other output variables, the
// reductions (inner tiles), u's rows, v's block; u is another output variable (none for 1-D
// outputs), preferring one the vector operands do not read. A block variable goes outside all
// of these: an output variable (not one of the block's row variables) that every vector
// operand reads as its outermost index, reading no other row variable, where a broadcast
// operand exists and reads none of it: b in a convolution whose weights are blocked by output
// channel, O[h,w,b,k] += I[h+r,w+s,c] * W[b,r,s,c,k] (one block of W serves the whole map). Sizes come from loop_nest's tile
// sizes: blocks of 4/3/2/1 vectors (or all of v when it is at most 64), 1-24 rows, reduction
// tiles of 64 or none. Where a second output variable x is at most 8 long (a convolution's 7x7
// map), blocks of 2-4 rows of u (as 3 allows) x all of x x v's block lead ("rows k/3 x h,
// vector w"), x's loop between u's rows and v. Splits and interchanges that would exceed
// `limits` drop the sketch.
// 2') Where the statement is a sum or max and another output variable v' is read with stride 1
// by some input and 0 or 1 by the others while the output is strided along it (a CHW 1x1
// convolution with weights W[c,k]: O[k,h,w] += I[c,h,w] * W[c,k]), the same blocks are made with
// v' as the vector variable (the code generator stores their accumulators by a scatter), the
// other output variables as rows. They rank first at each rank where they fill a tenth more of
// their vectors' lanes than v (fused, as the code generator fuses contiguous loops: 49 of 64
// for a 7x7 map) does, else after all of v's ("rows h/4, vector k/64, reduction c/64"); where
// rule 2) fails, after the copies' and reductions' blocks below.
// A copy whose one input is strided along v by more than 4 (a transpose, a layout change), where
// 2) fails, gets blocks of a vector's lanes (then half) of the input's contiguous variable e x
// one vector of v instead ("transpose n/16, vector m/16"), the other output variables outside,
// e's tile outside v's: the code generator transposes such a block in registers.
// A reduction whose inputs read v with a larger stride (attention scores, a global pool over
// CHW) gets, where a reduction variable d is read with stride 1 by every input that reads it,
// blocks of a vector's lanes (then half, then 24) of consecutive elements of v, one accumulator
// each, with d vectorized innermost and the other reductions between ("fold j/16, vector d
// (reduced)"): the code generator folds the block into vectors of the output.
std::vector<Sketch> LoopNestSketches(const LoopTree& tree, const Limits& limits,
                                     const SketchOptions& options = {});

// The sketches as text, one per line: action names separated by spaces (the `sketches`
// observation).
std::string SketchesText(const std::vector<Sketch>& sketches);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_SKETCHES_H_
