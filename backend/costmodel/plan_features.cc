#include "backend/costmodel/plan_features.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backend/codegen/kernel_plan.h"
#include "nlohmann/json.hpp"

namespace looptool {
namespace {

constexpr double kL1Bytes = 32 << 10;
constexpr double kL2Bytes = 1 << 20;
constexpr int kLevels = 3;  // loops outside the register block whose footprints count

// Elements of `var` the loops from `d` inward cover: the outermost such loop's extent.
int64_t Cover(const StatementPlan& s, int d, int var) {
  for (int i = std::max(d, 0); i < static_cast<int>(s.loops.size()); ++i) {
    const LoopPlan& l = s.loops[i];
    if (l.var == var) return l.size * l.inner + l.tail;
  }
  return 1;
}

// Bytes of every tensor the loops from `d` inward touch (4-byte elements).
double Footprint(const StatementPlan& s, int d) {
  double bytes = 0;
  const auto add = [&](const AccessPlan& a) {
    double elements = 1;
    for (size_t v = 0; v < a.stride.size(); ++v) {
      if (a.stride[v] != 0) elements *= static_cast<double>(Cover(s, d, static_cast<int>(v)));
    }
    bytes += 4 * elements;
  };
  add(s.output);
  for (const AccessPlan& a : s.inputs) add(a);
  return bytes;
}

// The variable `a` reads at stride 1 (-1: none): the one its consecutive elements run along.
int UnitVar(const AccessPlan& a) {
  for (size_t v = 0; v < a.stride.size(); ++v) {
    if (a.stride[v] == 1) return static_cast<int>(v);
  }
  return -1;
}

// Bytes of consecutive elements of `a` the register block (loops[scope..]) reads or writes in
// one run: what each cache line fetched for it serves.
double RunBytes(const StatementPlan& s, const AccessPlan& a) {
  const int u = UnitVar(a);
  if (u < 0) return 4;
  for (int i = s.scope; i < static_cast<int>(s.loops.size()); ++i) {
    if (s.loops[i].var == u) return 4.0 * static_cast<double>(Cover(s, s.scope, u));
  }
  return 4;
}

// How one iteration of loop `d` (outside the block) moves the accesses: the largest jump in
// bytes, and the fraction of accesses that stay put or go on where the block left off (their
// stride-1 variable: a stream the prefetcher follows).
std::pair<double, double> Movement(const StatementPlan& s, int d) {
  if (d < 0 || d >= static_cast<int>(s.loops.size())) return {0, 1};
  const LoopPlan& l = s.loops[d];
  double jump = 0, sequential = 0, count = 0;
  const auto add = [&](const AccessPlan& a) {
    const int64_t stride =
        l.var >= 0 && l.var < static_cast<int>(a.stride.size()) ? a.stride[l.var] : 0;
    jump = std::max(jump, 4.0 * static_cast<double>(std::abs(stride) * l.inner));
    sequential += stride == 0 || l.var == UnitVar(a);
    count += 1;
  };
  add(s.output);
  for (const AccessPlan& a : s.inputs) add(a);
  return {jump, sequential / count};
}

// Whether the code generator transposes the block's input in registers (block_emitter's
// PlanTransposes): a copy whose input is strided along the vector variable, with at least half
// a vector of the input's consecutive elements in the block.
bool TransposedBlock(const StatementPlan& s) {
  if (s.width < 8 || s.reduction != Reduction::kAssign || s.inputs.size() != 1) return false;
  const AccessPlan& a = s.inputs[0];
  if (a.kind != AccessPlan::Kind::kStrided) return false;
  return RunBytes(s, a) >= 4.0 * (s.width / 2);
}

// Distinct rows of `a` the register block (loops[scope..]) touches: the product of the block's
// cover of each variable `a` moves along other than its stride-1 one.
double BlockRows(const StatementPlan& s, const AccessPlan& a) {
  const int u = UnitVar(a);
  double rows = 1;
  std::vector<bool> seen(a.stride.size(), false);
  for (int i = s.scope; i < static_cast<int>(s.loops.size()); ++i) {
    const int v = s.loops[i].var;
    if (v < 0 || v >= static_cast<int>(a.stride.size()) || a.stride[v] == 0 || v == u ||
        seen[v]) {
      continue;
    }
    seen[v] = true;
    rows *= static_cast<double>(Cover(s, s.scope, v));
  }
  return rows;
}

// Distinct rows of every tensor the register block touches (the streams of cache lines the
// block walks at once): BlockRows summed over the accesses.
double Streams(const StatementPlan& s) {
  double total = BlockRows(s, s.output);
  for (const AccessPlan& a : s.inputs) total += BlockRows(s, a);
  return total;
}

// Bytes of consecutive elements of `a` the kernel walks before it jumps to other rows (the
// length of each stream the prefetcher follows; the register block walks Streams() of them at
// once): its stride-1 variable's cover by the block and by the loops just outside it that move
// `a` along that variable or leave it where it is, up to the first that moves it elsewhere.
// Rows that follow each other in memory count as one stream only where Lower() walks them as
// one loop: a loop over the next row ends the stream even where it continues it.
double StreamBytes(const StatementPlan& s, const AccessPlan& a) {
  const int u = UnitVar(a);
  if (u < 0) return 4;
  int i = s.scope - 1;
  for (; i >= 0; --i) {
    const int v = s.loops[i].var;
    const bool moves = v >= 0 && v < static_cast<int>(a.stride.size()) && a.stride[v] != 0;
    if (moves && v != u) break;
  }
  return 4.0 * static_cast<double>(Cover(s, i + 1, u));
}

// log2 of `bytes` of the output and each input: the smallest, and their mean.
std::pair<double, double> MinAndMeanLog2(const StatementPlan& s,
                                         double (*bytes)(const StatementPlan&,
                                                         const AccessPlan&)) {
  double min = std::log2(bytes(s, s.output)), sum = min;
  for (const AccessPlan& a : s.inputs) {
    const double b = std::log2(bytes(s, a));
    min = std::min(min, b);
    sum += b;
  }
  return {min, sum / (1.0 + static_cast<double>(s.inputs.size()))};
}

// Iterations of loop `i` of `s` (a tail counts as one more; the vector loop, when it steps
// fewer elements than a vector, steps a vector's worth).
double Trips(const StatementPlan& s, int i) {
  const LoopPlan& l = s.loops[i];
  double size = static_cast<double>(l.size);
  if (i == s.vector_loop && s.width > 1 && l.inner < s.width) {
    size = std::ceil(size * static_cast<double>(l.inner) / s.width);
  }
  return size + (l.tail > 0 ? 1 : 0);
}

}  // namespace

const std::vector<std::string>& PlanFeatureNames() {
  static const std::vector<std::string>* names = [] {
    auto* n = new std::vector<std::string>{
        "bias",           "vectorized",       "horizontal",        "log2_width",
        "lane_waste",     "register_fill",    "log2_accumulators", "loops_in_block",
        "unrolled_loops", "gathers",          "broadcasts",        "reduction_outside_block"};
    for (int l = 1; l <= kLevels; ++l) n->push_back("log2_bytes_outside_" + std::to_string(l));
    for (int l = 1; l <= kLevels; ++l) {
      n->push_back("fits_l1_outside_" + std::to_string(l));
      n->push_back("fits_l2_outside_" + std::to_string(l));
    }
    n->push_back("log2_flops");
    n->push_back("loops_outside_block");
    // How the kernel walks memory (what ranks memory-bound kernels).
    n->push_back("log2_min_run_bytes");
    n->push_back("log2_mean_run_bytes");
    for (int l = 1; l <= 2; ++l) {
      n->push_back("log2_jump_bytes_outside_" + std::to_string(l));
      n->push_back("sequential_outside_" + std::to_string(l));
    }
    n->push_back("transposed_block");
    // The schedule's stream mark on the statement (stream_L<p>: non-temporal stores).
    n->push_back("streamed_output");
    // The schedule's fold mark on the statement (fold_L<p>: a pool's window rows folded).
    n->push_back("folded_rows");
    // Inputs of stride 2 along the vector variable (loads and a permute; not `gathers`).
    n->push_back("stride_two_loads");
    // Loop overhead and memory streams (2026-12-05 evening): the rows the block walks at once,
    // loops with a tail, the trip count of the loop just outside the block, the statement's
    // flops per run of the block, and the plan's other statements (passes of their own).
    // tools/replan_records computes them for records written before.
    n->push_back("log2_block_streams");
    n->push_back("tail_loops");
    n->push_back("log2_trips_outside_1");
    n->push_back("log2_flops_per_block_run");
    n->push_back("other_statements");
    // Passes over the output: the trips of the reduction loops outside the block, each of
    // which loads and stores the output block again.
    n->push_back("log2_output_passes");
    // The bytes the statement's accesses span over the whole nest (each access once, each of
    // its variables over its full range: a convolution's input counts its windows' overlap;
    // where the data sits between runs, what streaming stores and the loops' order pay for),
    // and how the third loop outside the block moves the accesses.
    n->push_back("log2_kernel_bytes");
    n->push_back("log2_jump_bytes_outside_3");
    n->push_back("sequential_outside_3");
    // The consecutive bytes of each tensor the kernel walks before it jumps elsewhere (the
    // length of the streams the prefetcher follows): the shortest, and the mean of log2.
    n->push_back("log2_min_stream_bytes");
    n->push_back("log2_mean_stream_bytes");
    // The register block's own data (2026-12-06): the output's rows it writes at once and the
    // consecutive bytes of each, the bytes of every tensor it touches, and its flops per byte
    // of them (what it reuses in registers: a broadcast row kept for several output rows).
    n->push_back("log2_output_block_rows");
    n->push_back("log2_output_run_bytes");
    n->push_back("log2_block_bytes");
    n->push_back("log2_block_flops_per_byte");
    // The output written with a stride along the vector variable (2026-12-06: a scatter per
    // vector on AVX-512, lane by lane on AVX2; each reload of a partial result the same way).
    n->push_back("strided_output");
    return n;
  }();
  return *names;
}

std::vector<double> PlanFeatures(const LoopTree& tree, Isa isa) {
  const KernelPlan plan = Lower(tree, isa);
  const Program& program = tree.program();
  size_t main = 0;
  for (size_t i = 1; i < plan.statements.size(); ++i) {
    if (program.StatementFlops(plan.statements[i].statement) >
        program.StatementFlops(plan.statements[main].statement)) {
      main = i;
    }
  }
  std::vector<double> f;
  f.reserve(PlanFeatureNames().size());
  f.push_back(1);
  if (plan.statements.empty()) {
    f.resize(PlanFeatureNames().size(), 0);
    return f;
  }
  const StatementPlan& s = plan.statements[main];
  const int n = static_cast<int>(s.loops.size());
  f.push_back(s.width > 1);
  f.push_back(s.horizontal);
  f.push_back(std::log2(static_cast<double>(s.width)));
  double waste = 0;
  int var = -1;
  if (s.width > 1 && s.vector_loop < n) {
    const LoopPlan& v = s.loops[s.vector_loop];
    var = v.var;
    const double e = static_cast<double>(v.size * v.inner + v.tail);
    const double chunks = std::ceil(e / s.width);
    waste = chunks > 0 ? (chunks * s.width - e) / (chunks * s.width) : 0;
  }
  f.push_back(waste);
  f.push_back(static_cast<double>(s.accumulators) / std::max(1, s.budget.registers));
  f.push_back(std::log2(1.0 + s.accumulators));
  int unrolled = 0;
  for (const LoopPlan& l : s.loops) unrolled += l.unrolled;
  f.push_back(n - s.scope);
  f.push_back(unrolled);
  // Inputs strided along the vector variable: stride 2 loads as two vectors (or a masked span)
  // and a permute (VectorOps::LoadStrided), any other stride lane by lane or by a hardware
  // gather.
  int gathers = 0, broadcasts = 0, stride_two = 0;
  for (const AccessPlan& a : s.inputs) {
    if (var >= 0 && var < static_cast<int>(a.stride.size()) && std::abs(a.stride[var]) > 1) {
      ++(a.stride[var] == 2 ? stride_two : gathers);
    }
    broadcasts += a.kind == AccessPlan::Kind::kBroadcast;
  }
  f.push_back(gathers);
  f.push_back(broadcasts);
  f.push_back(s.scope > 0 && s.loops[s.scope - 1].reduction);
  std::vector<double> bytes;
  for (int l = 1; l <= kLevels; ++l) bytes.push_back(Footprint(s, s.scope - l));
  for (double b : bytes) f.push_back(std::log2(b) / 20);
  for (double b : bytes) {
    f.push_back(b <= kL1Bytes);
    f.push_back(b <= kL2Bytes);
  }
  f.push_back(std::log2(static_cast<double>(std::max<int64_t>(1, program.Flops()))) / 30);
  f.push_back(s.scope);
  const auto [min_run, mean_run] = MinAndMeanLog2(s, RunBytes);
  f.push_back(min_run / 12);
  f.push_back(mean_run / 12);
  for (int l = 1; l <= 2; ++l) {
    const auto [jump, sequential] = Movement(s, s.scope - l);
    f.push_back(std::log2(1 + jump) / 24);
    f.push_back(sequential);
  }
  f.push_back(TransposedBlock(s));
  f.push_back(tree.schedule(s.statement).stream);
  f.push_back(tree.schedule(s.statement).fold);
  f.push_back(stride_two);
  f.push_back(std::log2(Streams(s)) / 8);
  int tails = 0;
  double runs = 1, passes = 1;
  for (int i = 0; i < n; ++i) {
    tails += s.loops[i].tail > 0;
    if (i < s.scope) runs *= Trips(s, i);
    if (i < s.scope && s.loops[i].reduction) passes *= Trips(s, i);
  }
  f.push_back(tails);
  f.push_back(s.scope > 0 ? std::log2(Trips(s, s.scope - 1)) / 10 : 0);
  const double flops = static_cast<double>(std::max<int64_t>(1, program.StatementFlops(
                           s.statement)));
  f.push_back(std::log2(std::max(1.0, flops / runs)) / 20);
  f.push_back(static_cast<double>(plan.statements.size()) - 1);
  f.push_back(std::log2(passes) / 10);
  f.push_back(std::log2(Footprint(s, 0)) / 30);
  const auto [jump3, sequential3] = Movement(s, s.scope - 3);
  f.push_back(std::log2(1 + jump3) / 24);
  f.push_back(sequential3);
  const auto [min_stream, mean_stream] = MinAndMeanLog2(s, StreamBytes);
  f.push_back(min_stream / 20);
  f.push_back(mean_stream / 20);
  const double block_bytes = Footprint(s, s.scope);
  f.push_back(std::log2(BlockRows(s, s.output)) / 8);
  f.push_back(std::log2(RunBytes(s, s.output)) / 12);
  f.push_back(std::log2(block_bytes) / 20);
  f.push_back(std::log2(std::max(1.0, flops / runs) / block_bytes) / 8);
  f.push_back(s.output.kind == AccessPlan::Kind::kStrided);
  return f;
}

std::string PlanFeaturesJson(const LoopTree& tree, Isa isa) {
  const std::vector<double> f = PlanFeatures(tree, isa);
  const std::vector<std::string>& names = PlanFeatureNames();
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i < names.size() && i < f.size(); ++i) j[names[i]] = f[i];
  return j.dump();
}

}  // namespace looptool
