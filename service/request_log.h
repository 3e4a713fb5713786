// RequestLog: the session a client's StartSession or ForkSession made, by the request id the
// client sent with the call (metadata looptool-request-id). A call that the client's gRPC sends
// again after its connection broke (the server ran it, the reply was lost) carries the same id,
// and gets the same session instead of making an orphan. Bounded: the last `capacity` requests,
// each remembered for `ttl`. Thread-safe.
#ifndef LOOPTOOL_SERVICE_REQUEST_LOG_H_
#define LOOPTOOL_SERVICE_REQUEST_LOG_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace looptool::service {

class RequestLog {
 public:
  RequestLog(size_t capacity, absl::Duration ttl) : capacity_(capacity), ttl_(ttl) {}

  // The session `client`'s request `request` made, if it is remembered at `now`.
  std::optional<int64_t> Find(const std::string& client, const std::string& request,
                              absl::Time now) const;
  // Remembers that `client`'s request `request` made `session` at `now`.
  void Record(const std::string& client, const std::string& request, int64_t session,
              absl::Time now);

 private:
  using Key = std::pair<std::string, std::string>;  // client, request id
  struct Entry {
    int64_t session = 0;
    absl::Time at;
  };
  const size_t capacity_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<Key> order_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_REQUEST_LOG_H_
