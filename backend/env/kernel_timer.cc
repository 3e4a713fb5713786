#include "backend/env/kernel_timer.h"

#include <array>
#include <utility>

namespace looptool {
namespace {

constexpr std::array<std::pair<Measurement::Timing, const char*>, 7> kTimingNames = {{
    {Measurement::Timing::kFull, "full"},
    {Measurement::Timing::kSettled, "settled"},
    {Measurement::Timing::kConfirmed, "confirmed"},
    {Measurement::Timing::kSlower, "slower"},
    {Measurement::Timing::kOnce, "once"},
    {Measurement::Timing::kUntimed, "untimed"},
    {Measurement::Timing::kAbandoned, "abandoned"},
}};

}  // namespace

const char* TimingName(Measurement::Timing timing) {
  for (const auto& [t, name] : kTimingNames) {
    if (t == timing) return name;
  }
  return "full";
}

std::optional<Measurement::Timing> TimingFromName(absl::string_view name) {
  for (const auto& [t, n] : kTimingNames) {
    if (name == n) return t;
  }
  return std::nullopt;
}

}  // namespace looptool
