#include "tests/backend/codegen/jit_check.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/actions/action_space.h"
#include "backend/actions/apply.h"
#include "backend/codegen/compile.h"
#include "backend/interp/interpreter.h"
#include "backend/ir/parser.h"
#include "backend/schedule/loop_tree_text.h"
#include "util/check.h"

namespace looptool::testing {
namespace {

// Each tensor alone in a mapping between two inaccessible pages, its first element (kAtStart) or
// its last (kAtEnd) against one of them, 4-byte aligned only as the kernel ABI allows: a kernel
// that reads or writes one float outside a tensor faults. kOneFloatIn starts every tensor one
// float after its leading guard: no base is aligned to a vector (streamed stores' other body).
enum class Placement { kAtStart, kAtEnd, kOneFloatIn };

class GuardedTensors {
 public:
  GuardedTensors(const TensorData& data, Placement placement) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (const TensorBuffer& t : data) {
      const size_t bytes = std::max<size_t>(t.size(), 1) * sizeof(float);
      const size_t inner = (bytes + sizeof(float) + page - 1) / page * page;
      Region r;
      r.size = inner + 2 * page;
      void* base =
          mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      LT_CHECK(base != MAP_FAILED);
      r.base = static_cast<char*>(base);
      LT_CHECK(mprotect(r.base, page, PROT_NONE) == 0);
      LT_CHECK(mprotect(r.base + page + inner, page, PROT_NONE) == 0);
      char* first = placement == Placement::kAtStart     ? r.base + page
                    : placement == Placement::kOneFloatIn ? r.base + page + sizeof(float)
                                                          : r.base + page + inner - bytes;
      r.data = reinterpret_cast<float*>(first);
      r.count = t.size();
      std::memcpy(r.data, t.data(), t.size() * sizeof(float));
      regions_.push_back(r);
      pointers_.push_back(r.data);
    }
  }
  GuardedTensors(const GuardedTensors&) = delete;
  GuardedTensors& operator=(const GuardedTensors&) = delete;
  ~GuardedTensors() {
    for (const Region& r : regions_) munmap(r.base, r.size);
  }

  float* const* pointers() const { return pointers_.data(); }
  void CopyTo(TensorData& data) const {
    for (size_t i = 0; i < regions_.size(); ++i) {
      std::memcpy(data[i].data(), regions_[i].data, regions_[i].count * sizeof(float));
    }
  }

 private:
  struct Region {
    char* base = nullptr;
    size_t size = 0;
    float* data = nullptr;
    size_t count = 0;
  };
  std::vector<Region> regions_;
  std::vector<float*> pointers_;
};

// What a fault inside a guarded run prints before the process dies: the schedule and ISA (a
// test binary's diagnostics; the handler may only write(2) a buffer filled beforehand).
char fault_note[8192];

void PrintFaultNote(int) {
  const ssize_t ignored = write(STDERR_FILENO, fault_note, std::strlen(fault_note));
  (void)ignored;
}

// Runs `kernel` on a copy of `data` in guarded mappings and copies the tensors back.
void RunGuarded(const Kernel& kernel, Placement placement, const std::string& what,
                TensorData& data) {
  GuardedTensors guarded(data, placement);
  const std::string note = absl::StrCat(
      "\nThe kernel touched memory outside its tensors (a guard page; each tensor's ",
      placement == Placement::kAtEnd ? "last" : "first", " element against it",
      placement == Placement::kOneFloatIn ? ", one float in" : "", "): ", what);
  std::snprintf(fault_note, sizeof(fault_note), "%s\n", note.c_str());
  struct sigaction action = {}, old_segv = {}, old_bus = {};
  action.sa_handler = PrintFaultNote;
  action.sa_flags = SA_RESETHAND;  // the note, then the fault again with the default action
  sigaction(SIGSEGV, &action, &old_segv);
  sigaction(SIGBUS, &action, &old_bus);
  kernel.Run(guarded.pointers());
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  guarded.CopyTo(data);
}

}  // namespace

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

LoopTree RandomLoopNestSchedule(const LoopTree& initial, int length, std::mt19937& rng,
                                int* applied) {
  const ActionSpace& space = LoopNestActionSpace();
  LoopTree tree = initial;
  for (int i = 0; i < length; ++i) {
    const std::vector<bool> mask = ActionMask(tree, space, Limits{});
    std::vector<int> legal;
    for (int a = 0; a < space.size(); ++a) {
      if (mask[a]) legal.push_back(a);
    }
    if (legal.empty()) break;
    ActionResult r = Apply(tree, space.actions[legal[rng() % legal.size()]], Limits{});
    LT_CHECK(r.had_effect());  // the mask allowed it
    tree = std::move(r.tree);
    if (applied != nullptr) ++*applied;
  }
  return tree;
}

std::string CompareWithInterpreter(const LoopTree& tree, Isa isa, bool real_inputs,
                                   bool negative_inputs, const CodegenOptions& options) {
  const Program& p = tree.program();
  KernelCompiler compiler(isa, options);
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
    TensorData poisoned = expected;
    // Poison outputs so that unwritten elements show.
    for (int t : p.OutputTensors()) {
      for (float& x : poisoned[t]) x = std::nanf("");
    }
    Interpret(tree, expected);
    std::vector<Placement> placements = {Placement::kAtEnd, Placement::kAtStart};
    if (options.stream_output_min_bytes > 0) placements.push_back(Placement::kOneFloatIn);
    for (Placement placement : placements) {
      TensorData actual = poisoned;
      RunGuarded(*kernel, placement,
                 absl::StrCat(Traits(isa).name, " kernel of\n", LoopTreeText(tree)), actual);
      for (int t : p.OutputTensors()) {
        for (size_t i = 0; i < expected[t].size(); ++i) {
          const float e = expected[t][i], a = actual[t][i];
          const bool ok = integers ? e == a : std::fabs(e - a) <= 1e-4f * (1 + std::fabs(e));
          if (!ok) {
            return absl::StrCat(Traits(isa).name, ": ", p.tensor(t).name, "[", i, "] = ", a,
                                ", expected ", e, " (", integers ? "integer" : "real",
                                " inputs)\nschedule:\n", LoopTreeText(tree), "plan:\n",
                                DescribePlan(Lower(tree, isa, options), p));
          }
        }
      }
    }
  }
  return "";
}

}  // namespace looptool::testing
