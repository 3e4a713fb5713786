#include "tests/backend/codegen/jit_check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/actions/apply.h"
#include "backend/codegen/compile.h"
#include "backend/interp/interpreter.h"
#include "backend/ir/parser.h"
#include "backend/schedule/loop_tree_text.h"
#include "util/check.h"

namespace looptool::testing {

std::vector<Isa> HostIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kSse}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

LoopTree InitialTree(const std::string& program) {
  auto p = ParseProgram(program, Limits{});
  LT_CHECK(p.ok());
  return LoopTree::Initial(std::make_shared<const Program>(*std::move(p)));
}

LoopTree WithActions(const LoopTree& tree, const std::string& actions) {
  LoopTree t = tree;
  for (absl::string_view name : absl::StrSplit(actions, ',', absl::SkipWhitespace())) {
    auto action = ActionFromName(absl::StripAsciiWhitespace(name));
    LT_CHECK(action.ok());
    ActionResult r = Apply(t, *action, Limits{});
    if (!r.had_effect()) {
      std::fprintf(stderr, "test bug: %s has no effect (%s) on\n%s", std::string(name).c_str(),
                   Describe(r.reason).c_str(), LoopTreeText(t).c_str());
      std::abort();
    }
    t = r.tree;
  }
  return t;
}

std::string CompareWithInterpreter(const LoopTree& tree, Isa isa, bool real_inputs,
                                   bool negative_inputs) {
  const Program& p = tree.program();
  KernelCompiler compiler(isa);
  auto kernel = compiler.Compile(tree);
  if (!kernel.ok()) return absl::StrCat("compile failed: ", kernel.status().ToString());
  for (bool integers : {true, false}) {
    if (!integers && !real_inputs) break;
    TensorData expected = AllocateTensors(p);
    FillInputs(p, 42, integers, expected);
    if (negative_inputs) {
      for (int t : p.InputTensors()) {
        for (float& x : expected[t]) x -= 3;
      }
    }
    TensorData actual = expected;
    // Poison outputs so that unwritten elements show.
    for (int t : p.OutputTensors()) {
      for (float& x : actual[t]) x = std::nanf("");
    }
    Interpret(tree, expected);
    std::vector<float*> pointers;
    for (auto& buffer : actual) pointers.push_back(buffer.data());
    kernel->Run(pointers.data());
    for (int t : p.OutputTensors()) {
      for (size_t i = 0; i < expected[t].size(); ++i) {
        const float e = expected[t][i], a = actual[t][i];
        const bool ok = integers ? e == a : std::fabs(e - a) <= 1e-4f * (1 + std::fabs(e));
        if (!ok) {
          return absl::StrCat(Traits(isa).name, ": ", p.tensor(t).name, "[", i, "] = ", a,
                              ", expected ", e, " (", integers ? "integer" : "real",
                              " inputs)\nschedule:\n", LoopTreeText(tree), "plan:\n",
                              DescribePlan(Lower(tree, isa), p));
        }
      }
    }
  }
  return "";
}

}  // namespace looptool::testing
