#include "client/cpp/search/short_candidate_loss.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace looptool::client::internal {

double ShortCandidateLoss(std::vector<double> losses, int rank) {
  if (losses.empty()) return 0;
  const size_t n = std::min(losses.size(), static_cast<size_t>(std::max(rank, 1)));
  std::nth_element(losses.begin(), losses.begin() + (n - 1), losses.end());
  return losses[n - 1];
}

}  // namespace looptool::client::internal
