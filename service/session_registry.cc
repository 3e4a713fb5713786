#include "service/session_registry.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"

namespace looptool::service {

absl::StatusOr<int64_t> SessionRegistry::Add(std::shared_ptr<Session> session, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(sessions_.size()) >= max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "Too many sessions: this server keeps at most ", max_sessions_,
        "; end some with EndSession (idle ones are reaped)"));
  }
  int64_t id = 0;
  do {
    uint64_t bits = 0;
    if (getrandom(&bits, sizeof(bits), 0) != sizeof(bits)) {
      return absl::InternalError("Cannot draw a session id: getrandom failed");
    }
    id = static_cast<int64_t>(bits >> 1);  // 63 random bits: non-negative, as clients expect
  } while (sessions_.count(id) != 0 || ended_.count(id) != 0);
  sessions_.emplace(id, Entry{std::move(session), now});
  return id;
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::Find(int64_t id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("Session not found: ", id));
  it->second.last_used = now;
  return it->second.session;
}

int SessionRegistry::End(int64_t id) {
  absl::MutexLock lock(&mu_);
  if (sessions_.erase(id) != 0) Retire(id);
  return static_cast<int>(sessions_.size());
}

int SessionRegistry::ReapIdle(absl::Time now, absl::Duration idle_timeout) {
  absl::MutexLock lock(&mu_);
  int reaped = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_used > idle_timeout) {
      Retire(it->first);
      it = sessions_.erase(it);
      ++reaped;
    } else {
      ++it;
    }
  }
  return reaped;
}

void SessionRegistry::Retire(int64_t id) {
  ended_.insert(id);
  ended_order_.push_back(id);
  if (ended_order_.size() > kRememberedEnded) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

int SessionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

}  // namespace looptool::service
