// kernel_soak: a seeded, time-bounded differential soak of the code generator. Draws programs of
// every kind the language writes (matmuls with and without relu, GEMV, convolutions CHW and
// NHWC at strides 1-3 with and without depthwise, pooling, reductions, transposes of 2 and 3
// dimensions, broadcasts, elementwise ops, concatenations, two-statement programs) at random
// sizes with tails, applies a random sequence of legal loop_nest actions (from the untiled nest,
// or a few from one of its sketches), and compares the JIT kernel of every host ISA, under random
// code generator options (stride-2 pairs, stride-2 and stride-1 tap shifts, stride-2 reads'
// 8-lane tails at 8 lanes on or off, non-temporal stores of outputs above a random size) and, in
// 3 of 4 cases, every pool window's rows folded (the fold mark), with the interpreter
// (CompareWithInterpreter: guard pages around every tensor, negative inputs, unaligned bases
// when stores stream). The CI's tests check fixed seeds; this runs for as long as it is given.
//
//   bazel build //tests/backend/codegen:kernel_soak
//   bazel-bin/tests/backend/codegen/kernel_soak [SECONDS=60] [SEED=1]
//
// Each case's line goes to stderr before it runs (a kernel that faults kills the process after
// it, printing its loop tree); a mismatch prints the case, the loop tree and the difference to
// stdout. Exits 1 if any case failed. Schedules the compiler refuses (code size) are counted,
// not failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backend/actions/action.h"
#include "backend/actions/apply.h"
#include "backend/actions/sketches.h"
#include "backend/codegen/isa.h"
#include "backend/ir/limits.h"
#include "backend/schedule/loop_tree.h"
#include "backend/schedule/loop_tree_text.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

class ProgramDraw {
 public:
  explicit ProgramDraw(std::mt19937& rng) : rng_(rng) {}

  std::string Next() {
    switch (Int(0, 13)) {
      case 0:
        return absl::StrCat("C[m,n] += A[m,k] * B[k,n]", Maybe(" -> relu"), "; m=", Size(),
                            " n=", Size(), " k=", Size());
      case 1:
        return absl::StrCat("y[m] += A[m,k] * x[k]; m=", Size(), " k=", Size());
      case 2:
        return absl::StrCat("y[n] += x[k] * A[k,n]; n=", Size(), " k=", Size());
      case 3: {  // CHW convolution at stride 1-3
        const int st = Int(1, 3);
        return absl::StrCat("O[k,h,w] += I[c, ", Stride(st, "h"), "+r, ", Stride(st, "w"),
                            "+s] * W[k,c,r,s]", Maybe(" -> relu"), "; k=", Int(1, 20),
                            " h=", Int(1, 9), " w=", Int(1, 40), " c=", Int(1, 9),
                            " r=", Int(1, 3), " s=", Int(1, 3));
      }
      case 4: {  // NHWC convolution
        const int st = Int(1, 3);
        return absl::StrCat("O[h,w,k] += I[", Stride(st, "h"), "+r, ", Stride(st, "w"),
                            "+s, c] * W[r,s,c,k]; k=", Int(1, 40), " h=", Int(1, 7),
                            " w=", Int(1, 12), " c=", Int(1, 20), " r=", Int(1, 3),
                            " s=", Int(1, 3));
      }
      case 5: {  // depthwise, CHW or NHWC
        const int st = Int(1, 2);
        if (Int(0, 1)) {
          return absl::StrCat("O[c,h,w] += I[c, ", Stride(st, "h"), "+r, ", Stride(st, "w"),
                              "+s] * W[c,r,s]; c=", Int(1, 9), " h=", Int(1, 8),
                              " w=", Int(1, 40), " r=3 s=3");
        }
        return absl::StrCat("O[h,w,c] += I[", Stride(st, "h"), "+r, ", Stride(st, "w"),
                            "+s, c] * W[r,s,c]; c=", Int(1, 50), " h=", Int(1, 6),
                            " w=", Int(1, 9), " r=3 s=3");
      }
      case 6: {  // pooling
        const int st = Int(1, 3);
        const char* op = Int(0, 1) ? "max=" : "+=";
        if (Int(0, 1)) {
          return absl::StrCat("O[c,h,w] ", op, " I[c, ", Stride(st, "h"), "+r, ",
                              Stride(st, "w"), "+s]; c=", Int(1, 6), " h=", Int(1, 8),
                              " w=", Int(1, 45), " r=", Int(1, 3), " s=", Int(1, 3));
        }
        return absl::StrCat("O[h,w,c] ", op, " I[", Stride(st, "h"), "+r, ", Stride(st, "w"),
                            "+s, c]; c=", Int(1, 70), " h=", Int(1, 6), " w=", Int(1, 9),
                            " r=", Int(1, 3), " s=", Int(1, 3));
      }
      case 7: {  // reductions
        const char* op = Int(0, 1) ? "max=" : "+=";
        switch (Int(0, 3)) {
          case 0:
            return absl::StrCat("s[m] ", op, " A[m,n]; m=", Size(), " n=", Size());
          case 1:
            return absl::StrCat("s[n] ", op, " A[m,n]; m=", Size(), " n=", Size());
          case 2:
            return absl::StrCat("t[] ", op, " A[m,n]; m=", Int(1, 30), " n=", Size());
          default:
            return absl::StrCat("O[c] ", op, " I[c,h,w]", Maybe(" -> relu"), "; c=", Int(1, 40),
                                " h=", Int(1, 7), " w=", Int(1, 7));
        }
      }
      case 8: {  // transposes
        if (Int(0, 1)) return absl::StrCat("B[n,m] = A[m,n]; m=", Size(), " n=", Size());
        const char* forms[] = {"B[c,h,w] = A[h,w,c]", "B[h,w,c] = A[c,h,w]",
                               "B[w,c,h] = A[c,h,w]"};
        return absl::StrCat(forms[Int(0, 2)], Maybe(" -> relu"), "; c=", Int(1, 33),
                            " h=", Int(1, 9), " w=", Int(1, 21));
      }
      case 9:
        return absl::StrCat("B[m,n] = a[n]; m=", Size(), " n=", Size());
      case 10: {
        const char* ops[] = {"+", "*"};
        return absl::StrCat("C[m,n] = A[m,n] ", ops[Int(0, 1)], " B[m,n]", Maybe(" -> relu"),
                            "; m=", Int(1, 20), " n=", Size());
      }
      case 11: {
        const int a = Size(), b = Size();
        return absl::StrCat("C[m,a] = A[m,a]; C[m,b+", a, "] = B[m,b]; m=", Int(1, 12),
                            " a=", a, " b=", b);
      }
      case 12:
        return absl::StrCat("C[m,n] += A[m,k] * B[k,n]; D[m] += E[m,n]; m=", Int(1, 30),
                            " n=", Size(), " k=", Int(1, 30));
      default:
        return absl::StrCat("S[h,i,j] += Q[h,i,d] * K[h,j,d]; h=", Int(1, 3), " i=", Int(1, 9),
                            " j=", Size(), " d=", Int(1, 40));
    }
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // Sizes with tails at every vector width, a few large.
  int Size() { return Int(0, 7) == 0 ? Int(65, 300) : Int(1, 64); }
  std::string Maybe(const char* s) { return Int(0, 2) == 0 ? s : ""; }
  static std::string Stride(int stride, const char* var) {
    return stride == 1 ? var : absl::StrCat(stride, "*", var);
  }
  std::mt19937& rng_;
};

int Main(int argc, char** argv) {
  double seconds = 60;
  uint32_t seed = 1;
  if (argc > 3 || (argc > 1 && (!absl::SimpleAtod(argv[1], &seconds) || !(seconds > 0) ||
                                seconds > 7 * 24 * 3600)) ||
      (argc > 2 && !absl::SimpleAtoi(argv[2], &seed))) {
    std::fprintf(stderr,
                 "usage: kernel_soak [SECONDS=60] [SEED=1]: SECONDS a number in (0, 604800], "
                 "SEED an integer in 0..4294967295\n");
    return 2;
  }
  std::mt19937 rng(seed);
  ProgramDraw draw(rng);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
  int cases = 0, kernels = 0, refused = 0, failed = 0;
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = draw.Next();
    LoopTree start = testing::InitialTree(text);
    // A third of the cases start from one of the program's sketches (either vector unit's), as
    // the searches do, and take a few random actions from there.
    std::string from = "the untiled nest";
    if (rng() % 3 == 0) {
      SketchOptions sketch_options;
      sketch_options.target = rng() % 2 ? Isa::kAvx512 : Isa::kAvx2;
      const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{}, sketch_options);
      if (!sketches.empty()) {
        const Sketch& sketch = sketches[rng() % sketches.size()];
        for (const Action& a : sketch.actions) {
          ActionResult r = Apply(start, a, Limits{});
          if (!r.had_effect()) {
            std::printf("FAILED: sketch '%s' of %s: an action had no effect\n",
                        sketch.description.c_str(), text.c_str());
            return 1;
          }
          start = std::move(r.tree);
        }
        from = absl::StrCat("sketch '", sketch.description, "' (",
                            Traits(sketch_options.target).name, ")");
      }
    }
    const int length = std::uniform_int_distribution<int>(0, from[0] == 's' ? 4 : 14)(rng);
    LoopTree tree = testing::RandomLoopNestSchedule(start, length, rng);
    // Most pools fold their window's rows (the schedule's fold mark; the walk may have set it).
    bool folds = false;
    if (rng() % 4 != 0) {
      std::vector<StatementSchedule> schedules = tree.schedules();
      for (int s = 0; s < tree.program().num_statements(); ++s) {
        schedules[s].fold = CanFoldRows(tree.program(), s);
      }
      absl::StatusOr<LoopTree> marked =
          LoopTree::Create(tree.program_ptr(), std::move(schedules), tree.cursor());
      if (!marked.ok()) {
        std::printf("FAILED: the fold marks: %s\n", marked.status().ToString().c_str());
        return 1;
      }
      tree = *std::move(marked);
    }
    for (const StatementSchedule& s : tree.schedules()) folds = folds || s.fold;
    CodegenOptions options;
    options.pair_stride_two_phases = rng() % 4 != 0;
    options.shift_stride_two_taps = rng() % 4 != 0;
    const int stream = static_cast<int>(rng() % 3);
    options.stream_output_min_bytes = stream == 0 ? 0 : stream == 1 ? 1 : 1 + rng() % 4096;
    options.shift_unit_stride_taps = rng() % 4 != 0;
    options.half_width_stride_two_tails = rng() % 4 != 0;
    options.masked_stride_two_economies = rng() % 4 != 0;
    ++cases;
    // One line a case (a fault prints the loop tree itself: jit_check's guard note).
    std::fprintf(stderr,
                 "case %d (seed %u, %d actions from %s): %s | pairs %d shifts %d unit shifts %d "
                 "half tails %d masked pairs %d folds %d stream %lld\n",
                 cases, seed, length, from.c_str(), text.c_str(), options.pair_stride_two_phases,
                 options.shift_stride_two_taps, options.shift_unit_stride_taps,
                 options.half_width_stride_two_tails, options.masked_stride_two_economies, folds,
                 static_cast<long long>(options.stream_output_min_bytes));
    for (Isa isa : testing::HostIsas()) {
      const bool negative = rng() % 2 == 0;
      const std::string diff =
          testing::CompareWithInterpreter(tree, isa, /*real_inputs=*/true, negative, options);
      ++kernels;
      if (diff.rfind("compile failed", 0) == 0 &&
          diff.find("RESOURCE_EXHAUSTED") != std::string::npos) {
        ++refused;
        continue;
      }
      if (!diff.empty()) {
        ++failed;
        std::printf("FAILED case %d, %s: %s\n%s%s\n", cases, Traits(isa).name, text.c_str(),
                    LoopTreeText(tree).c_str(), diff.c_str());
        std::fflush(stdout);
      }
    }
  }
  std::printf("%d cases, %d kernels checked on %zu ISAs, %d refused (code size), %d failed\n",
              cases, kernels, testing::HostIsas().size(), refused, failed);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) { return looptool::Main(argc, argv); }
