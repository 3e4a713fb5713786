// SessionRegistry: the server's live sessions by id. Each session carries its own lock, so
// concurrent clients stepping different sessions never wait for each other, and a session is
// held by shared_ptr so EndSession or the idle reaper never frees one a handler is using. Ids
// are 63 random bits from the kernel's CSPRNG, so one client cannot guess (and step or end)
// another's session; an id is not reused while it is live or among the last ended ones.
// Thread-safe.
#ifndef LOOPTOOL_SERVICE_SESSION_REGISTRY_H_
#define LOOPTOOL_SERVICE_SESSION_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backend/env/episode.h"

namespace looptool::service {

// One client's episode. Lock `mu` for everything but the immutable fields.
struct Session {
  Session(std::string benchmark_uri, std::unique_ptr<Episode> episode)
      : benchmark(std::move(benchmark_uri)), episode(std::move(episode)) {}
  const std::string benchmark;
  absl::Mutex mu;
  std::unique_ptr<Episode> episode ABSL_GUARDED_BY(mu);  // never null
};

class SessionRegistry {
 public:
  explicit SessionRegistry(int max_sessions) : max_sessions_(max_sessions) {}

  // Registers `session` under a fresh random id in [0, 2^63). RESOURCE_EXHAUSTED when
  // max_sessions are live.
  absl::StatusOr<int64_t> Add(std::shared_ptr<Session> session, absl::Time now);
  // The session of `id`, marked as used at `now`. NOT_FOUND "Session not found: <id>".
  absl::StatusOr<std::shared_ptr<Session>> Find(int64_t id, absl::Time now);
  // Removes `id` if it is live; returns how many sessions remain.
  int End(int64_t id);
  // Removes the sessions unused since `now - idle_timeout`; returns how many it removed.
  int ReapIdle(absl::Time now, absl::Duration idle_timeout);
  int size() const;

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    absl::Time last_used;
  };
  static constexpr size_t kRememberedEnded = 1 << 16;
  void Retire(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_sessions_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  // Recently ended ids, never handed out again (bounded).
  std::set<int64_t> ended_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> ended_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_SESSION_REGISTRY_H_
