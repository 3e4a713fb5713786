// ThreadPool: a fixed set of threads running queued closures, for the RPCs that may block (a
// kernel being timed, a session busy elsewhere) so that gRPC's own threads never do. The queue is
// bounded; Schedule refuses work beyond it (the caller answers RESOURCE_EXHAUSTED). Hand-written
// because boost::asio::thread_pool (the library candidate here; gRPC 1.51 and Abseil 20220623
// export none) queues without bound and cannot refuse. Thread-safe.
#ifndef LOOPTOOL_SERVICE_THREAD_POOL_H_
#define LOOPTOOL_SERVICE_THREAD_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace looptool::service {

class ThreadPool {
 public:
  ThreadPool(int num_threads, size_t max_queued);
  // Runs every closure already queued, then joins the threads.
  ~ThreadPool();

  // Queues `fn`; false (and `fn` is dropped) when max_queued closures are already waiting, or
  // once the destructor has begun.
  bool Schedule(std::function<void()> fn);
  // Whether the destructor has begun (queued work still runs; new work is refused).
  bool stopping() const;

 private:
  void Work();

  const size_t max_queued_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_THREAD_POOL_H_
