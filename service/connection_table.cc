#include "service/connection_table.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace looptool::service {

uint64_t ConnectionTable::Opened(int fd, const std::string& address, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const uint64_t serial = next_serial_++;
  Connection& c = open_[serial];
  c.fd = fd;
  c.name = absl::StrCat("conn:", address, "#", serial);
  c.last_active = now;
  by_fd_[fd] = serial;  // gRPC has closed whatever this number read before
  return serial;
}

void ConnectionTable::Closed(uint64_t serial, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(serial);
  if (it == open_.end()) return;
  for (const std::string& owner : it->second.owners) {
    auto n = connections_of_.find(owner);
    if (--n->second == 0) {
      connections_of_.erase(n);
      abandoned_[owner] = now;
    }
  }
  auto fd = by_fd_.find(it->second.fd);
  if (fd != by_fd_.end() && fd->second == serial) by_fd_.erase(fd);
  open_.erase(it);
}

Caller ConnectionTable::Identify(absl::string_view peer, const std::string& user,
                                 absl::Time now) {
  absl::MutexLock lock(&mu_);
  Connection* c = nullptr;
  absl::string_view number = peer;
  int fd = -1;
  if (absl::ConsumePrefix(&number, "fd:") && absl::SimpleAtoi(number, &fd)) {
    if (auto it = by_fd_.find(fd); it != by_fd_.end()) c = &open_.at(it->second);
  }
  Caller caller;
  caller.connection = c != nullptr ? c->name : absl::StrCat("conn:", peer);
  caller.owner = user.empty() ? caller.connection : absl::StrCat("user:", user);
  if (c != nullptr) {
    c->last_active = now;
    ++c->running;
    caller.serial = by_fd_.at(fd);
    if (c->owners.insert(caller.owner).second) {
      ++connections_of_[caller.owner];
      abandoned_.erase(caller.owner);  // back within its grace
    }
  }
  return caller;
}

std::vector<std::pair<std::string, absl::Time>> ConnectionTable::TakeAbandoned(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, absl::Time>> gone;
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    if (it->second <= now - grace_) {
      gone.emplace_back(it->first, it->second);
      it = abandoned_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

void ConnectionTable::CallEnded(const Caller& caller, absl::Time now) {
  if (caller.serial == 0) return;
  absl::MutexLock lock(&mu_);
  auto it = open_.find(caller.serial);
  if (it == open_.end()) return;  // closed meanwhile
  if (it->second.running > 0) --it->second.running;
  it->second.last_active = now;
}

std::optional<uint64_t> ConnectionTable::LongestIdle() const {
  absl::MutexLock lock(&mu_);
  // (busy, last active): an idle connection before any with a call running.
  std::optional<std::pair<bool, absl::Time>> best;
  std::optional<uint64_t> idlest;
  for (const auto& [serial, c] : open_) {
    const std::pair<bool, absl::Time> key(c.running > 0, c.last_active);
    if (!best.has_value() || key < *best) {
      best = key;
      idlest = serial;
    }
  }
  return idlest;
}

int ConnectionTable::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(open_.size());
}

}  // namespace looptool::service
