// BenchmarkStore: resolves benchmark URIs to programs. URIs of the built-in datasets resolve
// without AddBenchmark; programs that clients add are parsed on arrival (a malformed one is
// refused then, not at StartSession) and kept in a size-bounded cache, as CompilerGym's
// BenchmarkCache does. Thread-safe.
#ifndef LOOPTOOL_SERVICE_BENCHMARK_STORE_H_
#define LOOPTOOL_SERVICE_BENCHMARK_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backend/ir/program.h"
#include "backend/util/limits.h"

namespace looptool::service {

class BenchmarkStore {
 public:
  explicit BenchmarkStore(Limits limits, int64_t max_size_in_bytes = int64_t{256} << 20);

  // Parses `program_text` and stores it under `uri`, replacing an earlier one. Errors:
  // INVALID_ARGUMENT for an empty or non-benchmark:// URI, or a program that does not parse or
  // is over the caps (the parser's message, with line and column).
  absl::Status Add(absl::string_view uri, absl::string_view program_text);

  // The program of `uri`: one added by a client first, else a dataset's. NOT_FOUND
  // "Benchmark not found: <uri>" when neither has it; INVALID_ARGUMENT when a dataset's program
  // is over this server's caps.
  absl::StatusOr<std::shared_ptr<const Program>> Load(absl::string_view uri) const;

  int64_t size_in_bytes() const;
  int64_t max_size_in_bytes() const;
  // Evicts the oldest added benchmarks until the cache fits (each eviction O(log n)).
  void set_max_size_in_bytes(int64_t bytes);

 private:
  struct Entry {
    std::shared_ptr<const Program> program;
    int64_t bytes = 0;
    int64_t added = 0;  // insertion clock, for eviction
  };
  void EvictToFit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> added_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> by_age_ ABSL_GUARDED_BY(mu_);  // insertion clock -> URI
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_size_ ABSL_GUARDED_BY(mu_);
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_BENCHMARK_STORE_H_
