// ThreadPool: a fixed set of threads running queued closures, for the RPCs that may block (a
// kernel being timed, a session busy elsewhere) so that gRPC's own threads never do. Work is
// queued per key (the service's client identity) and the keys are served in turn, one closure
// each, so one client's many calls wait behind each other, not in front of everyone else's; a
// key may run at most `max_running_per_key` closures at once (one client's calls blocked on
// its own busy session cannot take every thread) and queue at most `max_queued_per_key`; the
// whole queue is bounded too, by `max_queued` for keys at or above their fair share of it
// (`max_queued` over the keys with work waiting, at least 1) and by twice that for the rest, so a few keys
// that fill it never lock the others out. Schedule refuses work beyond those bounds (the caller
// answers RESOURCE_EXHAUSTED). Within a key, closures start in the order they were scheduled.
// Hand-written because boost::asio::thread_pool (the library candidate here; gRPC 1.51 and
// Abseil 20220623 export none) queues without bound, in one line, and cannot refuse.
// Thread-safe.
#ifndef LOOPTOOL_SERVICE_THREAD_POOL_H_
#define LOOPTOOL_SERVICE_THREAD_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace looptool::service {

class ThreadPool {
 public:
  struct Options {
    int threads = 32;
    size_t max_queued = 1024;         // waiting closures, all keys together (see above)
    size_t max_queued_per_key = 256;  // waiting closures of one key
    int max_running_per_key = 8;      // closures of one key running at once
  };
  explicit ThreadPool(Options options);
  // Runs every closure already queued, then joins the threads.
  ~ThreadPool();

  // Queues `fn` under `key`. RESOURCE_EXHAUSTED (and `fn` is dropped) when the key's queue or
  // the whole queue is full, saying which; FAILED_PRECONDITION once the destructor has begun.
  absl::Status Schedule(const std::string& key, std::function<void()> fn);
  // Whether the destructor has begun (queued work still runs; new work is refused).
  bool stopping() const;

 private:
  struct Key {
    std::deque<std::function<void()>> queue;
    int running = 0;
    bool ready = false;  // listed in ready_
  };
  void Work();
  // Lists `key` among the ready keys when it has work queued and room to run it.
  void MaybeReady(const std::string& key, Key& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Key> keys_ ABSL_GUARDED_BY(mu_);  // keys with work queued or running
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);    // served in this order, in turn
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_THREAD_POOL_H_
