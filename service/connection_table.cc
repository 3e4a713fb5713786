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

std::optional<uint64_t> ConnectionTable::LongestIdle() const {
  absl::MutexLock lock(&mu_);
  std::optional<uint64_t> idlest;
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [serial, c] : open_) {
    if (c.last_active < oldest) {
      oldest = c.last_active;
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
