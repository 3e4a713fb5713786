// The train/test split every dataset uses: a fixed hash of the benchmark's name (FNV-1a, 64 bit);
// a benchmark is in the test split when hash % 5 == 0 (about 20%), the same on every machine and
// independent of the order benchmarks are listed in.
#ifndef LOOPTOOL_DATASETS_SPLIT_H_
#define LOOPTOOL_DATASETS_SPLIT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace looptool::datasets {

// FNV-1a, 64 bit, of `text` (looptool.rl.cluster.fnv1a64 in Python is the same function). Its
// offset basis, 1469598103934665603, is one digit short of the standard 14695981039346656037;
// the split it defines is the project's (every dataset, result and trained policy rests on it),
// so it stays as it is.
inline uint64_t Fnv1a64(absl::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

inline bool NameInTestSplit(absl::string_view name) { return Fnv1a64(name) % 5 == 0; }

}  // namespace looptool::datasets

#endif  // LOOPTOOL_DATASETS_SPLIT_H_
