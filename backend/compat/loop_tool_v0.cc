#include "backend/compat/loop_tool_v0.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/ir/parser.h"
#include "util/check.h"
#include "util/strict_int.h"

namespace looptool::compat {
namespace {

enum ActionIndex { kToggleMode = 0, kUp = 1, kDown = 2, kToggleThread = 3, kSplit = 4 };

// Caps that admit every upstream size (N up to 8M floats per tensor).
Limits LoopToolV0Limits() {
  Limits limits;
  limits.max_extent = kLoopToolV0MaxSize;
  limits.max_tensor_elements = kLoopToolV0MaxSize;
  limits.max_total_elements = 3 * kLoopToolV0MaxSize;
  return limits;
}

std::shared_ptr<const Program> AddProgram(int64_t size) {
  absl::StatusOr<Program> p =
      ParseProgram(absl::StrCat("C[a] = A[a] + B[a]\na=", size, "\n"), LoopToolV0Limits());
  LT_CHECK(p.ok());
  return std::make_shared<const Program>(*std::move(p));
}

}  // namespace

const std::vector<NamedActionSpace>& LoopToolV0ActionSpaces() {
  static const auto* spaces = new std::vector<NamedActionSpace>{
      {"simple", {"toggle_mode", "up", "down", "toggle_thread"}},
      {"split", {"toggle_mode", "up", "down", "toggle_thread", "split"}},
  };
  return *spaces;
}

const ObservationTable<LoopToolV0Inputs>& LoopToolV0Observations() {
  static const auto* table = [] {
    ObservationSpace flops{"flops", Observation::Kind::kDouble};
    flops.high = std::numeric_limits<double>::infinity();
    flops.deterministic = false;
    flops.platform_dependent = true;
    flops.default_value = Observation::Double(0);
    ObservationSpace tree{"loop_tree", Observation::Kind::kString};
    tree.default_value = Observation::String("");
    ObservationSpace state{"action_state", Observation::Kind::kInt64Tensor, {3}, 0,
                           static_cast<double>(int64_t{1} << 36)};
    state.default_value = Observation::Int64s({0, 0, 0}, {3});
    using Entry = ObservationEntry<LoopToolV0Inputs>;
    return new ObservationTable<LoopToolV0Inputs>(std::vector<Entry>{
        {flops, true,
         [](const LoopToolV0Inputs& in) -> absl::StatusOr<Observation> {
           absl::StatusOr<double> g = in.episode.Gflops();
           if (!g.ok()) return g.status();
           return Observation::Double(*g);
         }},
        {tree, false,
         [](const LoopToolV0Inputs& in) -> absl::StatusOr<Observation> {
           return Observation::String(in.episode.LoopTreeText());
         }},
        {state, false,
         [](const LoopToolV0Inputs& in) -> absl::StatusOr<Observation> {
           return Observation::Int64s(in.episode.ActionState(), {3});
         }},
    });
  }();
  return *table;
}

absl::StatusOr<std::optional<int64_t>> LoopToolV0Size(absl::string_view uri) {
  absl::string_view rest = uri;
  if (!absl::ConsumePrefix(&rest, "benchmark://")) return std::nullopt;
  if (absl::ConsumePrefix(&rest, "loop_tool-cuda-v0/")) {
    return absl::UnimplementedError(absl::StrCat(
        "Benchmark ", uri, ": this server has no CUDA backend; use benchmark://",
        kLoopToolV0Dataset, "/N"));
  }
  if (!absl::ConsumePrefix(&rest, absl::StrCat(kLoopToolV0Dataset, "/"))) return std::nullopt;
  int64_t n = 0;
  if (!ParseDecimal(rest, &n) || n < 1 || n > kLoopToolV0MaxSize) {
    return absl::NotFoundError(absl::StrCat("Benchmark not found: ", uri, " (", kLoopToolV0Dataset,
                                            " has N in 1..", kLoopToolV0MaxSize, ")"));
  }
  return n;
}

LoopToolV0Episode::LoopToolV0Episode(int64_t size, int space,
                                     std::shared_ptr<KernelTimer> timer)
    : size_(size),
      space_(space),
      program_(AddProgram(size)),
      timer_(std::move(timer)),
      order_{Level{size, 0}, Level{1, 0}, Level{1, 0}} {}

std::unique_ptr<Episode> LoopToolV0Episode::Clone() const {
  return std::make_unique<LoopToolV0Episode>(*this);
}

const std::string& LoopToolV0Episode::action_space_name() const {
  return LoopToolV0ActionSpaces()[space_].name;
}

const std::vector<std::string>& LoopToolV0Episode::action_names() const {
  return LoopToolV0ActionSpaces()[space_].actions;
}

// Upstream's resize: grow (+1) or shrink (-1) the cursor loop, re-deriving its parent
// (a', b') = divmod(a * x * k + b, (x + increment) * k), k the inner loops' extent; a shrink of a
// loop with a tail only drops the tail. Refused (no change) at cursor 0 or out of bounds.
void LoopToolV0Episode::Resize(int increment) {
  if (cursor_ == 0) return;
  const Level parent = order_[cursor_ - 1];
  const Level loop = order_[cursor_];
  int64_t k = 1;
  for (int i = static_cast<int>(order_.size()) - 1; i > cursor_; --i) {
    k = k * order_[i].size + order_[i].tail;
  }
  if (increment == -1 && loop.tail != 0) increment = 0;
  const int64_t x = loop.size + increment;
  if (x < 1 || x > size_) return;
  // Elements under the parent loop. Upstream's code leaves the loop's own tail out of this sum
  // (its docstring has it in); where the tail is not 0 that breaks its invariant and upstream
  // fails an assertion. We take the docstring's sum, equal to upstream's wherever upstream works.
  const int64_t n = parent.size * (loop.size * k + loop.tail) + parent.tail;
  const int64_t d = x * k;
  const int64_t a = n / d, b = n % d;
  if (a < 1 || a > size_) return;
  order_[cursor_ - 1] = Level{a, b};
  order_[cursor_] = Level{x, 0};
}

absl::StatusOr<bool> LoopToolV0Episode::Act(int64_t index) {
  if (index < 0 || index >= static_cast<int64_t>(action_names().size())) {
    return absl::InvalidArgumentError("Out-of-range");  // upstream's message
  }
  switch (index) {
    case kToggleMode:
      select_mode_ = !select_mode_;
      break;
    case kToggleThread:
      thread_[cursor_] = !thread_[cursor_];
      break;
    case kUp:
      if (select_mode_) {
        cursor_ = (cursor_ + 1) % 3;
      } else {
        Resize(1);
      }
      break;
    case kDown:
      if (select_mode_) {
        cursor_ = (cursor_ + 2) % 3;
      } else {
        Resize(-1);
      }
      break;
    case kSplit:
      break;  // declared but a no-op upstream
  }
  return true;  // upstream never reports "no effect"
}

std::string LoopToolV0Episode::LoopTreeText() const {
  // loop_tool's dump with the innermost loop not shared between the four nodes (upstream
  // disables reuse there): L0, L1, then one innermost loop per node, each followed by its node.
  auto loop_line = [&](int level, int ref, bool threaded) {
    std::string line = absl::StrCat(std::string(level, ' '), "for a", std::string(level, '\''),
                                     " in ", order_[level].size);
    if (order_[level].tail != 0) absl::StrAppend(&line, " r ", order_[level].tail);
    absl::StrAppend(&line, " : L", ref);
    if (threaded) absl::StrAppend(&line, " cpu_parallel [thread]");
    return absl::StrCat(line, "\n");
  };
  static constexpr const char* kNodes[] = {"%0[a] <- read()", "%1[a] <- read()",
                                           "%2[a] <- add(%0, %1)", "%3[a] <- write(%2)"};
  std::string out = loop_line(0, 0, thread_[0]) + loop_line(1, 1, thread_[1]);
  for (int node = 0; node < 4; ++node) {
    // Upstream annotates only the first innermost loop it reaches (children(L1)[0]).
    out += loop_line(2, 2 + 2 * node, node == 0 && thread_[2]);
    absl::StrAppend(&out, "   ", kNodes[node], "\n");
  }
  return out;
}

LoopTree LoopToolV0Episode::Lower() const {
  LoopOrder order;
  for (const Level& l : order_) order.push_back(Loop{0, l.size, l.tail});
  absl::StatusOr<LoopTree> tree =
      LoopTree::Create(program_, {StatementSchedule{order, order}}, Cursor{0, 0});
  LT_CHECK(tree.ok());
  return *std::move(tree);
}

std::vector<int64_t> LoopToolV0Episode::ActionState() const {
  return {cursor_, order_[cursor_].size, order_[cursor_].tail};
}

absl::StatusOr<double> LoopToolV0Episode::Gflops() const {
  if (!timer_) return absl::FailedPreconditionError("observation flops needs a kernel timer");
  absl::StatusOr<Measurement> m = timer_->MeasureFor(Lower(), tenant_);
  if (!m.ok()) return m.status();
  return m->gflops;
}

absl::StatusOr<Observation> LoopToolV0Episode::Observe(absl::string_view name) const {
  const auto* entry = LoopToolV0Observations().Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Observation ", name, " is not served for ", kLoopToolV0Dataset,
                     " benchmarks (they serve flops, loop_tree and action_state, as upstream)"));
  }
  return entry->compute(LoopToolV0Inputs{*this});
}

}  // namespace looptool::compat
