// PlanFeatures: what a cost model sees of a schedule, read off the code generator's KernelPlan
// (LoopNest's decisions, not the loop tree's raw numbers): vector width and lane waste, the
// register block's size and fill, unrolling, gathers (inputs loaded lane by lane or by a hardware
// gather) and stride-2 loads (two vectors and a permute), how much data the loops just outside the
// register block touch (L1/L2 fit), and how the kernel walks memory (the consecutive bytes of each
// tensor the block touches, how far and whether in stream the three loops outside it move them, a
// transpose in registers, whether the schedule streams its output), what the loops outside the
// block cost (the rows the block walks at once, loops with tails, the trip count just outside it,
// flops per run of the block, passes over the output, other statements), and the bytes its accesses
// span over the whole nest and how far the kernel walks each tensor before it jumps (the streams
// the prefetcher follows), and what the register block itself touches (the output rows it writes at
// once and their length, its bytes, its flops per byte of them), and whether it stores the output
// with a stride along the vector (a scatter on AVX-512, lane by lane on AVX2), for the statement
// that does the most work. Cost models read them by name, so entries are only ever appended;
// tools/replan_records computes today's for records written before. (Until 2026-12-05 `gathers`
// counted stride-2 loads too.)
#ifndef LOOPTOOL_BACKEND_COSTMODEL_PLAN_FEATURES_H_
#define LOOPTOOL_BACKEND_COSTMODEL_PLAN_FEATURES_H_

#include <string>
#include <vector>

#include "backend/codegen/isa.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

// The names of PlanFeatures' entries, in order (kPlanFeatures of them; the first is the bias 1).
const std::vector<std::string>& PlanFeatureNames();

// The features of `tree`'s kernel as Lower(tree, isa) plans it. Total: every valid tree has them.
std::vector<double> PlanFeatures(const LoopTree& tree, Isa isa);

// The same as a JSON object, each entry under its name ({"bias":1,"vectorized":1,...}): the
// `plan_features` observation, and what tuning records keep of each measured kernel.
std::string PlanFeaturesJson(const LoopTree& tree, Isa isa);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_PLAN_FEATURES_H_
