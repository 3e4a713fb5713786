#include "backend/schedule/order_rules.h"

#include <cstdint>
#include <set>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace looptool::schedule_internal {
namespace {

template <typename... Args>
absl::Status Invalid(const Args&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

}  // namespace

absl::Status CheckOrder(const Program& program, const LoopOrder& order,
                        const std::vector<int>& vars, const std::string& where) {
  std::set<int> want(vars.begin(), vars.end()), have;
  // Innermost loop first, so that no extent computed below can overflow: each loop covers at
  // most its variable's extent (found by tools/fuzz.sh: a size of 2.5e18 overflowed).
  for (int d = static_cast<int>(order.size()) - 1; d >= 0; --d) {
    const Loop& l = order[d];
    if (l.var < 0 || l.var >= static_cast<int>(program.vars().size())) continue;  // below
    const int64_t extent = program.var(l.var).extent;
    if (l.size < 1 || l.tail < 0) break;  // reported below
    if (l.size > extent || l.tail > extent) {
      return Invalid(where, ": loop ", d + 1, " over '", program.var(l.var).name,
                     "' covers more than the variable's extent ", extent);
    }
    if (l.tail >= InnerExtent(order, d)) break;  // reported below
    if (Extent(order, d) > extent) {
      return Invalid(where, ": loop ", d + 1, " over '", program.var(l.var).name,
                     "' covers more than the variable's extent ", extent);
    }
  }
  int vectorized = 0;
  for (int d = 0; d < static_cast<int>(order.size()); ++d) {
    const Loop& l = order[d];
    if (l.var < 0 || l.var >= static_cast<int>(program.vars().size()) || !want.count(l.var)) {
      return Invalid(where, " loops over a variable its statement does not have");
    }
    const std::string& name = program.var(l.var).name;
    const int64_t inner = InnerExtent(order, d);
    if (l.size < 1) return Invalid(where, ": loop ", d + 1, " over '", name, "' has size ", l.size);
    if (l.tail < 0 || l.tail >= inner) {
      return Invalid(where, ": loop ", d + 1, " over '", name, "' has tail ", l.tail,
                     ", which must be below its inner extent ", inner);
    }
    if (l.vectorize) {
      ++vectorized;
      if (inner != 1) {
        return Invalid(where, ": loop ", d + 1, " over '", name,
                       "' is marked vectorize but is not the innermost loop over '", name, "'");
      }
    }
  }
  for (int d = 0; d < static_cast<int>(order.size()); ++d) {
    const Loop& l = order[d];
    if (!have.count(l.var) && Extent(order, d) != program.var(l.var).extent) {
      return Invalid(where, ": the loops over '", program.var(l.var).name, "' cover ",
                     Extent(order, d), " elements, not its extent ", program.var(l.var).extent);
    }
    have.insert(l.var);
  }
  if (have != want) {
    for (int v : want) {
      if (!have.count(v)) return Invalid(where, " has no loop over '", program.var(v).name, "'");
    }
  }
  if (vectorized > 1) return Invalid(where, " marks ", vectorized, " loops vectorize; at most one");
  return absl::OkStatus();
}


bool OrderHolds(const Program& program, const LoopOrder& order, const std::vector<int>& vars) {
  const int num_vars = static_cast<int>(program.vars().size());
  // The extent of the loops over each variable from the one last seen inward (innermost first:
  // each product is bounded by extents already checked), -1 before any: rule 1's inner extent.
  absl::InlinedVector<int64_t, 16> covered(num_vars, -1);
  absl::InlinedVector<bool, 16> wanted(num_vars, false);
  for (int v : vars) {
    if (v < 0 || v >= num_vars) return false;
    wanted[v] = true;
  }
  int vectorized = 0;
  for (int d = static_cast<int>(order.size()) - 1; d >= 0; --d) {
    const Loop& l = order[d];
    if (l.var < 0 || l.var >= num_vars || !wanted[l.var]) return false;
    const int64_t extent = program.var(l.var).extent;
    if (l.size < 1 || l.tail < 0 || l.size > extent || l.tail > extent) return false;
    const int64_t inner = covered[l.var] < 0 ? 1 : covered[l.var];
    if (l.tail >= inner) return false;
    if (l.vectorize && (inner != 1 || ++vectorized > 1)) return false;
    int64_t loops = 0;
    if (__builtin_mul_overflow(l.size, inner, &loops) ||
        __builtin_add_overflow(loops, l.tail, &loops) || loops > extent) {
      return false;
    }
    covered[l.var] = loops;
  }
  // The outermost loops over each variable cover its extent, and every variable has one.
  for (int v : vars) {
    if (covered[v] != program.var(v).extent) return false;
  }
  return true;
}

}  // namespace looptool::schedule_internal
