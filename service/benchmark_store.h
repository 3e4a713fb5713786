// BenchmarkStore: resolves benchmark URIs to programs for each client. URIs of the built-in
// datasets resolve without AddBenchmark and are immutable. Programs that a client adds are
// parsed on arrival (a malformed one is refused then, not at StartSession) and kept in that
// client's own size-bounded cache (keyed by the client's self-declared id, which survives its
// reconnects), as CompilerGym's BenchmarkCache does: one client can neither replace nor evict
// another's benchmarks, nor change another's cache size. Each cache is accounted to its owner
// (the identity that added to it last: CallContext::owner, never self-declared), and the
// server-wide bounds are shared fairly between owners: when all caches together pass the total,
// the owner holding the most bytes loses its oldest benchmark; when `max_clients` caches exist,
// a new one replaces the stalest cache of the owner holding the most caches, and only of an
// owner holding more than the adder's (or the adder's own). So an owner that churns through
// client ids evicts only itself. Thread-safe.
#ifndef LOOPTOOL_SERVICE_BENCHMARK_STORE_H_
#define LOOPTOOL_SERVICE_BENCHMARK_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backend/ir/program.h"
#include "backend/ir/limits.h"

namespace looptool::service {

class BenchmarkStore {
 public:
  // `max_client_bytes`: the default (and greatest) cache size of one client; `max_total_bytes`:
  // all clients' caches together; `max_clients`: caches kept at once.
  BenchmarkStore(Limits limits, int64_t max_client_bytes, int64_t max_total_bytes,
                 int max_clients = 4096);

  // Parses `program_text` and stores it under `uri` for `client`, replacing that client's
  // earlier one; the cache is accounted to `owner` from now on. Any URI scheme works
  // (benchmark://, file://, generator://, ...). Errors: INVALID_ARGUMENT for an empty URI or one
  // with spaces or control characters, or a program that does not parse or is over the caps
  // (the parser's message, with line and column); ALREADY_EXISTS for a built-in dataset URI
  // with a different program; RESOURCE_EXHAUSTED when `client` has no cache yet, `max_clients`
  // exist and no owner holds more than `owner` would.
  absl::Status Add(absl::string_view client, absl::string_view owner, absl::string_view uri,
                   absl::string_view program_text);

  // The program of `uri` for `client`: one the client added first, else a dataset's. NOT_FOUND
  // "Benchmark not found: <uri>" when neither has it; INVALID_ARGUMENT when a dataset's program
  // is over this server's caps.
  absl::StatusOr<std::shared_ptr<const Program>> Load(absl::string_view client,
                                                      absl::string_view uri) const;

  // The client's cache: bytes used, and its cap. set_max_size_in_bytes clamps `bytes` to
  // [0, max_client_bytes], evicts the client's oldest benchmarks until they fit, and returns the
  // cap it set (a client without a cache gets one, accounted to `owner`, only while there is
  // room for one; else the default cap stands).
  int64_t size_in_bytes(absl::string_view client) const;
  int64_t max_size_in_bytes(absl::string_view client) const;
  int64_t set_max_size_in_bytes(absl::string_view client, absl::string_view owner,
                                int64_t bytes);
  int64_t total_size_in_bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const Program> program;
    int64_t bytes = 0;
    int64_t added = 0;  // insertion clock, for eviction
  };
  struct ClientCache {
    std::string owner;
    std::map<std::string, Entry, std::less<>> by_uri;
    std::map<int64_t, std::string> by_age;  // insertion clock -> URI
    int64_t size = 0;
    int64_t max_size = 0;
    int64_t last_added = 0;
  };
  struct OwnerShare {
    int64_t bytes = 0;
    int caches = 0;
    std::map<int64_t, std::pair<std::string, std::string>> by_age;  // clock -> (client, URI)
  };
  using ClientIt = std::map<std::string, ClientCache, std::less<>>::iterator;

  // A new cache for `client`, owned by `owner`, making room by the rule above; nullopt when
  // there is none to make.
  std::optional<ClientIt> NewCache(absl::string_view client, absl::string_view owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accounts `client`'s cache to `owner` from now on.
  void SetOwner(ClientIt client, absl::string_view owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes one benchmark of `client`.
  void Erase(ClientIt client, std::map<std::string, Entry, std::less<>>::iterator entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `client`'s cache, its benchmarks and its cap.
  void DropCache(ClientIt client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictClientToFit(ClientIt client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictTotalToFit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  const int64_t max_client_bytes_;
  const int64_t max_total_bytes_;
  const size_t max_clients_;
  mutable absl::Mutex mu_;
  std::map<std::string, ClientCache, std::less<>> clients_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, OwnerShare, std::less<>> owners_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_BENCHMARK_STORE_H_
