#include "service/thread_pool.h"

namespace looptool::service {

ThreadPool::ThreadPool(int num_threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= max_queued_ || stopping_) return false;
  queue_.push_back(std::move(fn));
  return true;
}

void ThreadPool::Work() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

bool ThreadPool::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

}  // namespace looptool::service
