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

// Sessions are owned by the client identity that made them (CallContext::owner; a fork by the
// client that forked it, not the parent's), and shares are fair between owners: one owner may
// hold at most `max_per_owner`; when all `max_sessions` are taken, a client holding fewer than
// the largest holder gets a session by ending that holder's least recently used one (so a
// server filled by one client always serves the next, and a client is never cut below what the
// others hold). RESOURCE_EXHAUSTED otherwise.
class SessionRegistry {
 public:
  SessionRegistry(int max_sessions, int max_per_owner)
      : max_sessions_(max_sessions), max_per_owner_(max_per_owner) {}

  // Whether Add would take a session of `owner` now (it may end another owner's to make room),
  // changing nothing: the service asks before it builds an episode, so a client at its cap
  // costs nothing but this check. Add still decides.
  absl::Status CheckRoomFor(const std::string& owner) const;
  // Registers `session`, owned by `owner`, under a fresh random id in [0, 2^63).
  absl::StatusOr<int64_t> Add(std::shared_ptr<Session> session, const std::string& owner,
                              absl::Time now);
  // The session of `id`, marked as used at `now`. NOT_FOUND "Session not found: <id>".
  absl::StatusOr<std::shared_ptr<Session>> Find(int64_t id, absl::Time now);
  // Removes `id` if it is live; returns how many sessions remain.
  int End(int64_t id);
  // Removes the sessions unused since `now - idle_timeout`; returns how many it removed.
  int ReapIdle(absl::Time now, absl::Duration idle_timeout);
  // Removes the sessions `owner` holds that were last used at or before `since` (its client
  // left then; a session used since, by a client that came back, stays); returns how many.
  int EndOwnedBy(const std::string& owner, absl::Time since);
  int size() const;
  // Sessions `owner` holds.
  int owned_by(const std::string& owner) const;

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    std::string owner;
    absl::Time last_used;
  };
  static constexpr size_t kRememberedEnded = 1 << 16;
  // Removes the live session `it` points to; returns the next.
  std::map<int64_t, Entry>::iterator Remove(std::map<int64_t, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The refusal Add would give `owner` now, or OK with `largest` naming the holder whose least
  // recently used session must end to make room (empty when a place is free).
  absl::Status Refusal(const std::string& owner, std::string* largest) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the least recently used session of `largest`.
  void EndLeastRecentlyUsed(const std::string& largest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_sessions_;
  const int max_per_owner_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> owned_ ABSL_GUARDED_BY(mu_);  // owner -> sessions (> 0)
  // Recently ended ids, never handed out again (bounded).
  std::set<int64_t> ended_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> ended_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_SESSION_REGISTRY_H_
