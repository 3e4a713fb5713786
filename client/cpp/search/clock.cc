#include "client/cpp/search/clock.h"

#include "absl/time/clock.h"

namespace looptool::client {
namespace {

class Real final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock& RealClock() {
  static const Real* const clock = new Real();
  return *clock;
}

}  // namespace looptool::client
