#include "service/request_log.h"

#include "absl/status/status.h"

namespace looptool::service {

RequestLog::Claim& RequestLog::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    log_ = std::exchange(other.log_, nullptr);
    key_ = std::move(other.key_);
    seq_ = other.seq_;
  }
  return *this;
}

void RequestLog::Claim::Finish(int64_t session, absl::Time now) {
  if (log_ == nullptr) return;
  std::exchange(log_, nullptr)->Finished(key_, seq_, session, now);
}

void RequestLog::Claim::Release() {
  if (log_ == nullptr) return;
  std::exchange(log_, nullptr)->Finished(key_, seq_, std::nullopt, absl::Time());
}

absl::StatusOr<RequestLog::Begun> RequestLog::Begin(const std::string& client,
                                                    const std::string& request, absl::Time now) {
  Begun begun;
  if (request.empty()) return begun;
  const Key key(client, request);
  absl::MutexLock lock(&mu_);
  const auto not_running = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = entries_.find(key);
    return it == entries_.end() || !it->second.running;
  };
  if (!not_running()) {
    ++waiting_;
    const bool ended = mu_.AwaitWithTimeout(absl::Condition(&not_running), wait_);
    --waiting_;
    if (!ended) {
      return absl::UnavailableError(
          "An earlier attempt of this request (the same looptool-request-id) is still running; "
          "send it again later to get the session it makes");
    }
  }
  auto it = entries_.find(key);
  if (it != entries_.end() && now - it->second.at <= ttl_) {
    begun.made = it->second.session;
    return begun;
  }
  const uint64_t seq = next_seq_++;
  entries_[key] = Entry{/*running=*/true, /*session=*/0, now, seq};
  begun.claim.log_ = this;
  begun.claim.key_ = key;
  begun.claim.seq_ = seq;
  return begun;
}

void RequestLog::Finished(const Key& key, uint64_t seq, std::optional<int64_t> session,
                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.seq != seq) return;
  if (!session.has_value()) {  // failed: the next attempt runs
    entries_.erase(it);
    return;
  }
  it->second = Entry{/*running=*/false, *session, now, seq};
  finished_.emplace_back(key, seq);
  EvictLocked();
}

void RequestLog::Forget(const std::string& client, const std::string& request,
                        int64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key(client, request));
  if (it != entries_.end() && !it->second.running && it->second.session == session) {
    entries_.erase(it);
  }
}

void RequestLog::EvictLocked() {
  while (finished_.size() > capacity_) {
    auto it = entries_.find(finished_.front().first);
    if (it != entries_.end() && it->second.seq == finished_.front().second) entries_.erase(it);
    finished_.pop_front();
  }
}

int RequestLog::Waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace looptool::service
