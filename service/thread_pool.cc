#include "service/thread_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace looptool::service {

ThreadPool::ThreadPool(Options options) : options_(options) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::Status ThreadPool::Schedule(const std::string& key, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("the server is shutting down");
  auto found = keys_.find(key);
  const size_t mine = found == keys_.end() ? 0 : found->second.queue.size();
  if (mine >= options_.max_queued_per_key) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Server busy: this client has ", mine,
                     " calls waiting, the most one client may queue; retry later"));
  }
  if (queued_ >= options_.max_queued) {
    // Full: only keys below their fair share of the queue (among the keys with work waiting,
    // this one included) may still queue, up to twice the bound in all.
    if (queued_ >= 2 * options_.max_queued) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Server busy: ", queued_, " calls are waiting, the most it queues; retry later"));
    }
    size_t waiting = mine == 0 ? 1 : 0;
    for (const auto& [name, other] : keys_) waiting += other.queue.empty() ? 0 : 1;
    if (mine >= std::max<size_t>(1, options_.max_queued / waiting)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Server busy: ", queued_, " calls are waiting, the most it queues, and this client "
          "has ", mine, " of them, its share; retry later"));
    }
  }
  Key& k = found == keys_.end() ? keys_[key] : found->second;
  k.queue.push_back(std::move(fn));
  ++queued_;
  MaybeReady(key, k);
  return absl::OkStatus();
}

void ThreadPool::MaybeReady(const std::string& key, Key& k) {
  if (!k.ready && !k.queue.empty() && k.running < options_.max_running_per_key) {
    k.ready = true;
    ready_.push_back(key);
  }
}

void ThreadPool::Work() {
  while (true) {
    std::function<void()> fn;
    std::string key;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return !p->ready_.empty() || (p->stopping_ && p->queued_ == 0);
          },
          this));
      if (ready_.empty()) return;  // stopping, and nothing left to run
      key = std::move(ready_.front());
      ready_.pop_front();
      Key& k = keys_[key];
      k.ready = false;
      fn = std::move(k.queue.front());
      k.queue.pop_front();
      --queued_;
      ++k.running;
      MaybeReady(key, k);  // its next closure waits for the other keys' turns
    }
    fn();
    fn = nullptr;  // what it captured goes before the next one starts
    absl::MutexLock lock(&mu_);
    auto it = keys_.find(key);
    --it->second.running;
    if (it->second.running == 0 && it->second.queue.empty()) {
      keys_.erase(it);
    } else {
      MaybeReady(key, it->second);
    }
  }
}

bool ThreadPool::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

}  // namespace looptool::service
