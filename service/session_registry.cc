#include "service/session_registry.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"

namespace looptool::service {

absl::Status SessionRegistry::Refusal(const std::string& owner, std::string* largest) const {
  largest->clear();
  auto held = owned_.find(owner);
  const int holds = held == owned_.end() ? 0 : held->second;
  if (holds >= max_per_owner_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "Too many sessions for this client: it holds ", holds, ", the most one client may "
        "(--max_sessions_per_client); end some with EndSession"));
  }
  if (static_cast<int>(sessions_.size()) < max_sessions_) return absl::OkStatus();
  auto most = owned_.end();
  for (auto it = owned_.begin(); it != owned_.end(); ++it) {
    if (most == owned_.end() || it->second > most->second) most = it;
  }
  // After the swap the largest holder still holds at least as many as `owner` then does.
  if (most == owned_.end() || most->first == owner || most->second <= holds + 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "Too many sessions: this server keeps at most ", max_sessions_,
        " and no client holds more than this one; end some with EndSession (idle ones are "
        "reaped)"));
  }
  *largest = most->first;
  return absl::OkStatus();
}

absl::Status SessionRegistry::CheckRoomFor(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  std::string largest;
  return Refusal(owner, &largest);
}

absl::StatusOr<int64_t> SessionRegistry::Add(std::shared_ptr<Session> session,
                                             const std::string& owner, absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::string largest;
  if (absl::Status refused = Refusal(owner, &largest); !refused.ok()) return refused;
  if (!largest.empty()) EndLeastRecentlyUsed(largest);
  int64_t id = 0;
  do {
    uint64_t bits = 0;
    if (getrandom(&bits, sizeof(bits), 0) != sizeof(bits)) {
      return absl::InternalError("Cannot draw a session id: getrandom failed");
    }
    id = static_cast<int64_t>(bits >> 1);  // 63 random bits: non-negative, as clients expect
  } while (sessions_.count(id) != 0 || ended_.count(id) != 0);
  sessions_.emplace(id, Entry{std::move(session), owner, now});
  ++owned_[owner];
  return id;
}

void SessionRegistry::EndLeastRecentlyUsed(const std::string& largest) {
  auto victim = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.owner != largest) continue;
    if (victim == sessions_.end() || it->second.last_used < victim->second.last_used) victim = it;
  }
  if (victim != sessions_.end()) Remove(victim);
}

std::map<int64_t, SessionRegistry::Entry>::iterator SessionRegistry::Remove(
    std::map<int64_t, Entry>::iterator it) {
  auto owned = owned_.find(it->second.owner);
  if (--owned->second == 0) owned_.erase(owned);
  const int64_t id = it->first;
  auto next = sessions_.erase(it);
  ended_.insert(id);
  ended_order_.push_back(id);
  if (ended_order_.size() > kRememberedEnded) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  return next;
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
  if (auto it = sessions_.find(id); it != sessions_.end()) Remove(it);
  return static_cast<int>(sessions_.size());
}

int SessionRegistry::ReapIdle(absl::Time now, absl::Duration idle_timeout) {
  absl::MutexLock lock(&mu_);
  int reaped = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_used > idle_timeout) {
      it = Remove(it);
      ++reaped;
    } else {
      ++it;
    }
  }
  return reaped;
}

int SessionRegistry::EndOwnedBy(const std::string& owner, absl::Time since) {
  absl::MutexLock lock(&mu_);
  int ended = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.owner == owner && it->second.last_used <= since) {
      it = Remove(it);
      ++ended;
    } else {
      ++it;
    }
  }
  return ended;
}

int SessionRegistry::owned_by(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  auto it = owned_.find(owner);
  return it == owned_.end() ? 0 : it->second;
}

int SessionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

}  // namespace looptool::service
