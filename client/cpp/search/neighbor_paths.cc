#include "client/cpp/search/neighbor_paths.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace looptool::client::internal {
namespace {

// The other tile factors tried on each side of a tile action's.
constexpr int kFactorsEachSide = 2;

}  // namespace

std::vector<std::vector<int>> NeighborPaths(const std::vector<int>& path,
                                            const std::vector<std::string>& names) {
  // Each tile action's prefix (tile_L<p>_) and factor; the factors of each prefix, sorted.
  std::map<std::string, std::vector<std::pair<int, int>>> factors;  // prefix: (n, index)
  const auto split = [&](int a) -> std::optional<std::pair<std::string, int>> {
    if (a < 0 || a >= static_cast<int>(names.size())) return std::nullopt;
    const std::string& name = names[a];
    const size_t last = name.rfind('_');
    const absl::string_view digits =
        last == std::string::npos ? "" : absl::string_view(name).substr(last + 1);
    int n = 0;
    if (!absl::StartsWith(name, "tile_L") || digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &n)) {
      return std::nullopt;
    }
    return std::pair(name.substr(0, last + 1), n);
  };
  for (size_t a = 0; a < names.size(); ++a) {
    if (auto t = split(static_cast<int>(a))) {
      factors[t->first].emplace_back(t->second, static_cast<int>(a));
    }
  }
  for (auto& [prefix, list] : factors) std::sort(list.begin(), list.end());
  // The d-th nearest factor pair (a, b) of prefixes pi and pj with a * b == ni * nj, a below ni
  // (below) or above it, as indices of `names`; nullopt where there is none.
  const auto trade = [&](const std::string& pi, int ni, const std::string& pj, int nj, int d,
                         bool above) -> std::optional<std::pair<int, int>> {
    const std::vector<std::pair<int, int>>& li = factors[pi];
    const std::vector<std::pair<int, int>>& lj = factors[pj];
    const int64_t product = int64_t{ni} * nj;
    std::vector<std::pair<int, int>> found;  // (a's index, b's index), nearest to ni first
    const auto consider = [&](const std::pair<int, int>& a) {
      if (a.first <= 0 || a.first == ni || product % a.first != 0) return;
      const auto b = std::lower_bound(lj.begin(), lj.end(),
                                      std::pair(static_cast<int>(product / a.first), -1));
      if (b != lj.end() && b->first == product / a.first) found.emplace_back(a.second, b->second);
    };
    if (above) {
      for (const auto& a : li) {
        if (a.first > ni) consider(a);
      }
    } else {
      for (auto a = li.rbegin(); a != li.rend(); ++a) {
        if (a->first < ni) consider(*a);
      }
    }
    if (static_cast<int>(found.size()) < d) return std::nullopt;
    return found[d - 1];
  };
  std::vector<std::vector<int>> out;
  for (int d = 1; d <= kFactorsEachSide; ++d) {
    for (size_t i = 0; i < path.size(); ++i) {
      const std::optional<std::pair<std::string, int>> t = split(path[i]);
      if (!t.has_value()) continue;
      const std::vector<std::pair<int, int>>& list = factors[t->first];
      const auto at = std::lower_bound(list.begin(), list.end(), std::pair(t->second, path[i]));
      const ptrdiff_t k = at - list.begin();
      for (const ptrdiff_t j : {k - d, k + d}) {
        if (j < 0 || j >= static_cast<ptrdiff_t>(list.size())) continue;
        out.push_back(path);
        out.back()[i] = list[j].second;
      }
    }
    for (size_t i = 0; i < path.size(); ++i) {
      const std::optional<std::pair<std::string, int>> ti = split(path[i]);
      if (!ti.has_value()) continue;
      for (size_t j = i + 1; j < path.size(); ++j) {
        const std::optional<std::pair<std::string, int>> tj = split(path[j]);
        if (!tj.has_value()) continue;
        for (const bool above : {false, true}) {
          const std::optional<std::pair<int, int>> ab =
              trade(ti->first, ti->second, tj->first, tj->second, d, above);
          if (!ab.has_value()) continue;
          out.push_back(path);
          out.back()[i] = ab->first;
          out.back()[j] = ab->second;
        }
      }
    }
  }
  return out;
}

}  // namespace looptool::client::internal
