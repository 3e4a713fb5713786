// Clock: where a search reads the time. Searches run against the real clock; unit tests run them
// against a clock they advance themselves (tests/client/search/fake_state_source.h), so time
// limits and deadlines are tested without sleeping.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_CLOCK_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_CLOCK_H_

#include "absl/time/time.h"

namespace looptool::client {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Thread-safe.
const Clock& RealClock();

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_CLOCK_H_
