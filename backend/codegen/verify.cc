#include "backend/codegen/verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "backend/ir/strides.h"
#include "backend/schedule/ir_text.h"
#include "util/check.h"

namespace looptool {
namespace {

constexpr double kMaxExact = 16777216.0;  // 2^24: floats hold every integer below
// ReferenceTree: a variable steps along a row when it moves no tensor by more than this.
constexpr int64_t kRowStep = 16;

// The largest magnitude a partial result of the statement can reach on inputs in [-2, 2].
double MaxPartial(const Program& p, int s) {
  const Statement& st = p.statement(s);
  const double term = st.combiner == Combiner::kIdentity ? 2.0 : 4.0;
  double reduction = 1;
  for (int v : p.LoopVars(s)) {
    if (p.IsReductionVar(s, v)) reduction *= static_cast<double>(p.var(v).extent);
  }
  return term * reduction;
}

// The largest output magnitude the program reaches on the absolute values of `inputs`: for sums,
// the sum of |terms|, which bounds every partial sum in any order.
double AbsoluteBound(const LoopTree& initial, const TensorData& inputs) {
  TensorData abs = inputs;
  for (auto& buffer : abs) {
    for (float& x : buffer) x = std::fabs(x);
  }
  Interpret(initial, abs);
  double bound = 0;
  for (int t : initial.program().OutputTensors()) {
    for (float x : abs[t]) bound = std::max(bound, static_cast<double>(x));
  }
  return bound;
}

// The untiled nest in the order that reads memory best: each statement's variables outermost
// first by the largest stride they step in any of its tensors (ties in program order), so the
// innermost loops walk rows and the nest streams through its largest tensor instead of striding
// across it; innermost, the longest variable that steps along rows. Any order of an untiled nest computes the same sums; on the reference's inputs they
// are exact in every order (or within its tolerance, which holds for any order).
LoopTree ReferenceTree(const Program& program) {
  std::vector<StatementSchedule> schedules;
  for (int s = 0; s < program.num_statements(); ++s) {
    const Statement& st = program.statement(s);
    std::vector<int> vars = program.LoopVars(s);
    std::vector<int64_t> largest(program.vars().size(), 0);
    std::vector<const Access*> accesses = {&st.output};
    for (const Access& in : st.inputs) accesses.push_back(&in);
    for (const Access* access : accesses) {
      const std::vector<int64_t> strides = RowMajorStrides(program.tensor(access->tensor).shape);
      for (size_t d = 0; d < strides.size(); ++d) {
        for (const auto& term : access->index[d].terms) {
          largest[term.var] = std::max(largest[term.var], std::abs(term.coeff) * strides[d]);
        }
      }
    }
    std::stable_sort(vars.begin(), vars.end(),
                     [&](int a, int b) { return largest[a] > largest[b]; });
    // Innermost, of the variables that step along a row (by kRowStep elements at most), the
    // longest (ties: the one sorted last): the interpreter's inner loop then runs long (a 3x3
    // window's 3 steps would pay its per-loop overhead every third term).
    int inner = -1;
    for (int i = 0; i < static_cast<int>(vars.size()); ++i) {
      if (largest[vars[i]] > kRowStep) continue;
      if (inner < 0 || program.var(vars[i]).extent >= program.var(vars[inner]).extent) inner = i;
    }
    if (inner >= 0) std::rotate(vars.begin() + inner, vars.begin() + inner + 1, vars.end());
    const std::vector<int> out = program.OutputVars(s);
    StatementSchedule sched;
    for (int v : vars) {
      const Loop loop{v, program.var(v).extent, 0};
      sched.compute.push_back(loop);
      if (std::find(out.begin(), out.end(), v) != out.end()) sched.write.push_back(loop);
    }
    schedules.push_back(std::move(sched));
  }
  absl::StatusOr<LoopTree> tree = LoopTree::Create(
      std::make_shared<const Program>(program), std::move(schedules), Cursor{0, 0});
  LT_CHECK(tree.ok());
  return *std::move(tree);
}

}  // namespace

ReferenceRun MakeReference(const Program& program) {
  ReferenceRun ref;
  ref.expected = AllocateTensors(program);
  FillInputs(program, 20261122, /*small_integers=*/true, ref.expected);
  const LoopTree initial = ReferenceTree(program);
  double worst = 0;
  for (int s = 0; s < program.num_statements(); ++s) {
    if (program.statement(s).reduction == Reduction::kSum) worst = std::max(worst, MaxPartial(program, s));
  }
  if (worst >= kMaxExact) {
    // A long reduction: thin the inputs out until every output's sum of |terms| stays below
    // 2^24. Then every partial sum, in any order the kernel adds in, is an exact float, and the
    // comparison stays exact (a tolerance as large as the results would pass a wrong kernel).
    std::mt19937_64 rng(20261123);
    for (int attempt = 0; attempt < 8 && ref.tolerance == 0; ++attempt) {
      const double bound = AbsoluteBound(initial, ref.expected);
      if (bound < kMaxExact) break;
      const double keep = kMaxExact / (4 * bound);
      std::bernoulli_distribution kept(std::min(1.0, keep));
      for (int t : program.InputTensors()) {
        for (float& x : ref.expected[t]) {
          if (!kept(rng)) x = 0;
        }
      }
      if (attempt == 7) {
        // n additions in float err by at most n * 2^-24 of the running magnitude each.
        ref.tolerance = worst * worst / kMaxExact;
      }
    }
  }
  Interpret(initial, ref.expected);
  return ref;
}

absl::Status VerifyKernel(const Kernel& kernel, const LoopTree& tree, const ReferenceRun& reference,
                          TensorData& scratch, double* run_seconds, const VerificationRun& run) {
  const Program& p = tree.program();
  for (int t : p.InputTensors()) scratch[t] = reference.expected[t];
  for (int t : p.OutputTensors()) {
    for (float& x : scratch[t]) x = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<float*> pointers;
  for (auto& buffer : scratch) pointers.push_back(buffer.data());
  const auto start = std::chrono::steady_clock::now();
  bool ran = true;
  if (run) {
    ran = run(kernel, pointers.data());
  } else {
    kernel.Run(pointers.data());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (run_seconds != nullptr) *run_seconds = seconds;
  if (!ran) {
    return absl::DeadlineExceededError(
        absl::StrCat("the kernel's verification run was abandoned after ", seconds, " s"));
  }
  for (int t : p.OutputTensors()) {
    for (size_t i = 0; i < scratch[t].size(); ++i) {
      const float got = scratch[t][i], want = reference.expected[t][i];
      const bool ok = reference.tolerance == 0 ? got == want
                                               : std::fabs(got - want) <= reference.tolerance;
      if (!ok) {
        return absl::InternalError(absl::StrCat(
            "kernel failed verification: ", p.tensor(t).name, "[", i, "] = ", got,
            " where the reference interpreter computes ", want, "; schedule:\n", PrintIr(tree)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace looptool
