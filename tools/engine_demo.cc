// engine_demo: runs the loop-nest engine in-process on one benchmark, applies actions, and
// prints the loop tree and the observations an agent sees. A developer's tool; users drive the
// engine through the server and the `looptool` CLI.
//
//   bazel run //tools:engine_demo -- --benchmark=mm112_208_256 --actions=split_4,down,swap_down
#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/env/environment.h"
#include "backend/ir/parser.h"
#include "datasets/matmul_range.h"

ABSL_FLAG(std::string, benchmark, "mm112_208_256", "a name mmM_N_K of mm64_256_16_range-v0");
ABSL_FLAG(std::string, program, "", "a program in the loop-nest language (overrides --benchmark)");
ABSL_FLAG(std::string, actions, "", "comma-separated loop_tool action names to apply");

namespace looptool {
namespace {

int Main() {
  std::string text = absl::GetFlag(FLAGS_program);
  if (text.empty()) {
    auto shape = datasets::ParseMatmulName(absl::GetFlag(FLAGS_benchmark));
    if (!shape.ok()) {
      std::cerr << shape.status().message() << "\n";
      return 2;
    }
    text = datasets::MatmulProgram(*shape);
  }
  const Limits limits;
  auto program = ParseProgram(text, limits);
  if (!program.ok()) {
    std::cerr << "error: " << program.status().message() << "\n";
    return 2;
  }
  Environment env(LoopTree::Initial(std::make_shared<const Program>(*std::move(program))),
                  LoopToolActionSpace(), limits);
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_actions), ',', absl::SkipEmpty())) {
    auto action = ActionFromName(name);
    const int index = action.ok() ? LoopToolActionSpace().IndexOf(*action) : -1;
    if (index < 0) {
      std::cerr << "error: unknown action '" << name << "'\n";
      return 2;
    }
    const NoEffectReason r = *env.Step(index);
    std::printf("%-10s %s\n", std::string(name).c_str(),
                r == NoEffectReason::kNone ? "" : ("(no effect: " + Describe(r) + ")").c_str());
  }
  std::cout << "\n== loop_tree\n" << env.Observe("loop_tree")->text;
  std::cout << "\n== ir\n" << env.Observe("ir")->text;
  std::cout << "\n== flop_count " << env.Observe("flop_count")->integer << "\n";
  std::cout << "\n== loops_tensor (one row per loop: cursor size tail compute | histogram)\n";
  const auto lt = env.Observe("loops_tensor")->floats;
  for (int r = 0; r < env.tree().num_loops(); ++r) {
    for (int c = 0; c < 20; ++c) {
      std::printf(c == 4 ? " | %g" : c ? " %g" : "%g", lt[r * 20 + c]);
    }
    std::printf("\n");
  }
  std::cout << "\n== stride_tensor\n" << absl::StrJoin(env.Observe("stride_tensor")->floats, " ")
            << "\n";
  const auto mask = env.Observe("action_mask")->bools;
  std::vector<std::string> available;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) available.push_back(LoopToolActionSpace().Names()[i]);
  }
  std::cout << "\n== action_mask: " << absl::StrJoin(available, " ") << "\n";
  return 0;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return looptool::Main();
}
