// Eventually: polls a condition another thread or process makes true, until it holds or a
// deadline passes (a test's wait with a bound, never a bare sleep).
#ifndef LOOPTOOL_TESTS_SERVICE_EVENTUALLY_H_
#define LOOPTOOL_TESTS_SERVICE_EVENTUALLY_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace looptool::testing {

// Whether `done` held within `timeout`, checked every `poll`.
inline bool Eventually(const std::function<bool()>& done, absl::Duration timeout,
                       absl::Duration poll) {
  const absl::Time give_up = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(poll);
  }
  return true;
}

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_SERVICE_EVENTUALLY_H_
