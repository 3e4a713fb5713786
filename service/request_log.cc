#include "service/request_log.h"

namespace looptool::service {

std::optional<int64_t> RequestLog::Find(const std::string& client, const std::string& request,
                                        absl::Time now) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key(client, request));
  if (it == entries_.end() || now - it->second.at > ttl_) return std::nullopt;
  return it->second.session;
}

void RequestLog::Record(const std::string& client, const std::string& request, int64_t session,
                        absl::Time now) {
  absl::MutexLock lock(&mu_);
  Key key(client, request);
  if (entries_.count(key) == 0) order_.push_back(key);
  entries_[key] = Entry{session, now};
  while (order_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace looptool::service
