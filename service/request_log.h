// RequestLog: the session a client's StartSession or ForkSession made, by the request id the
// client sent with the call (metadata looptool-request-id). A call that the client's gRPC sends
// again after its connection broke (the server ran it, the reply was lost) carries the same id,
// and gets the same session instead of making an orphan.
//
// An attempt may arrive while an earlier attempt of the same request is still running (the
// connection broke mid-call; the server went on): it waits for that attempt, at most `wait`,
// and then answers with its session, or, when the earlier attempt failed, runs in its place.
// So however many attempts of one request arrive, and in whatever order, at most one makes a
// session. The wait blocks the calling thread: attempts of one request take the same path
// through the front end (inline or the pool, decided by the request's contents), so an inline
// attempt only ever waits for another inline one, which never blocks.
//
// Bounded: the last `capacity` finished requests, each remembered for `ttl` (requests still
// running are never forgotten: there are at most as many as calls running). Thread-safe.
#ifndef LOOPTOOL_SERVICE_REQUEST_LOG_H_
#define LOOPTOOL_SERVICE_REQUEST_LOG_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace looptool::service {

class RequestLog {
 private:
  using Key = std::pair<std::string, std::string>;  // client, request id

 public:
  // The right to run one request: the attempt holding it makes the session, then calls Finish.
  // Destroyed without Finish (the attempt failed), it lets the next attempt run. A
  // default-constructed Claim (a call without a request id) claims nothing.
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& other) noexcept { *this = std::move(other); }
    Claim& operator=(Claim&& other) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim() { Release(); }

    // Remembers that the request made `session` at `now`, and answers the attempts waiting.
    void Finish(int64_t session, absl::Time now);

   private:
    friend class RequestLog;
    void Release();
    RequestLog* log_ = nullptr;
    Key key_;
    uint64_t seq_ = 0;
  };

  // What Begin found: the session an earlier attempt made (`made`), or none, and then `claim`
  // is this attempt's.
  struct Begun {
    std::optional<int64_t> made;
    Claim claim;
  };

  RequestLog(size_t capacity, absl::Duration ttl, absl::Duration wait)
      : capacity_(capacity), ttl_(ttl), wait_(wait) {}

  // The session an attempt of `client`'s request `request` made, remembered at `now`, or the
  // claim to make it. Waits for an attempt still running, at most `wait`: UNAVAILABLE (which
  // clients retry) when it is still running then. An empty `request` claims nothing.
  absl::StatusOr<Begun> Begin(const std::string& client, const std::string& request,
                              absl::Time now);
  // Forgets that `client`'s request `request` made `session` (it has ended since), so that the
  // next Begin claims the request again.
  void Forget(const std::string& client, const std::string& request, int64_t session);

  // Attempts waiting for an earlier attempt of their request to end.
  int Waiting() const;

 private:
  struct Entry {
    bool running = true;
    int64_t session = 0;
    absl::Time at;
    uint64_t seq = 0;  // which claim made this entry: a claim only touches its own
  };
  void Finished(const Key& key, uint64_t seq, std::optional<int64_t> session, absl::Time now);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  const absl::Duration ttl_;
  const absl::Duration wait_;
  mutable absl::Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<Key, uint64_t>> finished_ ABSL_GUARDED_BY(mu_);  // oldest first
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_REQUEST_LOG_H_
