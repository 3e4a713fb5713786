// MeasurementCache: the result of measuring each (program, schedule) key, failures included,
// bounded both in entries and in bytes (keys, messages and the results themselves). When a new
// entry would pass either bound the cache is emptied first: the keys a search revisits come back
// within a few steps, and a full cache is a rare event not worth an eviction order. Not
// thread-safe: its owner locks.
#ifndef LOOPTOOL_BACKEND_TIMING_MEASUREMENT_CACHE_H_
#define LOOPTOOL_BACKEND_TIMING_MEASUREMENT_CACHE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

class MeasurementCache {
 public:
  MeasurementCache(size_t max_entries, int64_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The cached result for `key`, or null.
  const absl::StatusOr<Measurement>* Find(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // Caches `result` under `key` (a key already cached keeps its first result).
  void Insert(const std::string& key, const absl::StatusOr<Measurement>& result) {
    if (entries_.count(key) != 0) return;
    const int64_t bytes = static_cast<int64_t>(key.size() + result.status().message().size() +
                                               sizeof(result) + kNodeBytes);
    if (entries_.size() >= max_entries_ || bytes_ + bytes > max_bytes_) {
      entries_.clear();
      bytes_ = 0;
    }
    entries_.emplace(key, result);
    bytes_ += bytes;
  }
  size_t size() const { return entries_.size(); }
  int64_t bytes() const { return bytes_; }

 private:
  static constexpr int64_t kNodeBytes = 64;  // a map node's pointers and the key's header
  const size_t max_entries_;
  const int64_t max_bytes_;
  std::map<std::string, absl::StatusOr<Measurement>> entries_;
  int64_t bytes_ = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_MEASUREMENT_CACHE_H_
