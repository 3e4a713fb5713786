// ThreadPool on its own: everything scheduled runs on the pool's threads, the queue refuses work
// beyond max_queued (and a key's beyond max_queued_per_key), keys are served in turn and run at
// most max_running_per_key at once, and the destructor runs what is queued before it joins.
#include "service/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

ThreadPool::Options Sized(int threads, size_t max_queued) {
  ThreadPool::Options o;
  o.threads = threads;
  o.max_queued = max_queued;
  o.max_queued_per_key = max_queued;
  o.max_running_per_key = threads;
  return o;
}

// Schedules `fn` under `key`; whether it was queued.
bool Queue(ThreadPool& pool, std::function<void()> fn, const std::string& key = "k") {
  return pool.Schedule(key, std::move(fn)).ok();
}

// Holds one of `pool`'s threads with a closure under `key` until `release` is notified; returns
// once it runs. (Its own notification is shared: the closure may still be in Notify when the
// caller moves on.)
void Occupy(ThreadPool& pool, absl::Notification& release, const std::string& key = "k") {
  auto started = std::make_shared<absl::Notification>();
  ASSERT_TRUE(pool.Schedule(key, [started, &release] {
    started->Notify();
    release.WaitForNotification();
  }).ok());
  started->WaitForNotification();
}

TEST(ThreadPool, RunsEverythingScheduledOnItsOwnThreads) {
  std::atomic<int> ran{0};
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  {
    ThreadPool pool(Sized(3, 10000));
    for (int i = 0; i < 2000; ++i) {
      ASSERT_TRUE(Queue(pool, [&] {
        ++ran;
        absl::MutexLock lock(&mu);
        threads.insert(std::this_thread::get_id());
      }));
    }
  }
  EXPECT_EQ(ran.load(), 2000);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), 3u);
}

TEST(ThreadPool, ThreadsRunConcurrently) {
  // Two closures that each wait for the other: they finish only on two threads at once.
  // The pool is declared last: its destructor joins the closures before what they use goes.
  absl::Notification a_started, b_started, both_done_a, both_done_b;
  ThreadPool pool(Sized(2, 10));
  ASSERT_TRUE(Queue(pool, [&] {
    a_started.Notify();
    if (b_started.WaitForNotificationWithTimeout(absl::Seconds(30))) both_done_a.Notify();
  }));
  ASSERT_TRUE(Queue(pool, [&] {
    b_started.Notify();
    if (a_started.WaitForNotificationWithTimeout(absl::Seconds(30))) both_done_b.Notify();
  }));
  EXPECT_TRUE(both_done_a.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(both_done_b.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

TEST(ThreadPool, QueueBeyondMaxQueuedIsRefusedAndDropped) {
  std::atomic<int> ran{0};
  std::atomic<bool> dropped_ran{false};
  {
    absl::Notification release;
    ThreadPool pool(Sized(1, 2));
    Occupy(pool, release);
    EXPECT_TRUE(Queue(pool, [&] { ++ran; }));
    EXPECT_TRUE(Queue(pool, [&] { ++ran; }));
    EXPECT_FALSE(Queue(pool, [&] { dropped_ran = true; }));
    EXPECT_FALSE(Queue(pool, [&] { dropped_ran = true; }));
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 2);
  EXPECT_FALSE(dropped_ran.load());
}

TEST(ThreadPool, RoomFreesAsTheQueueDrains) {
  absl::Notification release, second_ran, third_ran;
  ThreadPool pool(Sized(1, 1));
  Occupy(pool, release);
  EXPECT_TRUE(Queue(pool, [&] { second_ran.Notify(); }));
  EXPECT_FALSE(Queue(pool, [] {}));
  release.Notify();
  second_ran.WaitForNotification();  // the queue is empty again
  EXPECT_TRUE(Queue(pool, [&] { third_ran.Notify(); }));
  EXPECT_TRUE(third_ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

TEST(ThreadPool, DestructorRunsQueuedClosuresInOrderThenJoins) {
  std::vector<int> order;  // written by the pool's one thread only
  std::atomic<bool> refused_while_stopping{false};
  absl::Notification started;
  auto pool = std::make_unique<ThreadPool>(Sized(1, 100));
  ThreadPool* raw = pool.get();
  // The pool's one thread is held until the destructor has begun.
  ASSERT_TRUE(Queue(*pool, [&, raw] {
    started.Notify();
    while (!raw->stopping()) std::this_thread::yield();
  }));
  started.WaitForNotification();
  EXPECT_FALSE(raw->stopping());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Queue(*pool, [&order, i] { order.push_back(i); }));
  // Work queued while the pool is being destroyed is refused.
  ASSERT_TRUE(Queue(*raw, [&, raw] { refused_while_stopping = !Queue(*raw, [] {}); }));
  pool.reset();  // returns only when every queued closure has run
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(refused_while_stopping.load());
}

TEST(ThreadPool, KeysAreServedInTurn) {
  std::vector<std::string> order;  // written by the pool's one thread only
  absl::Notification release;
  {
    ThreadPool pool(Sized(1, 100));
    Occupy(pool, release, "x");
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE(Queue(pool, [&order, i] { order.push_back(absl::StrCat("a", i)); }, "a"));
    }
    for (int i = 1; i <= 2; ++i) {
      ASSERT_TRUE(Queue(pool, [&order, i] { order.push_back(absl::StrCat("b", i)); }, "b"));
    }
    release.Notify();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2", "b2", "a3", "a4", "a5"}));
}

// One key's closures blocked (a client's calls waiting on its own busy session) hold at most
// max_running_per_key threads: another key's closure runs on the others meanwhile.
TEST(ThreadPool, AKeyRunsAtMostItsShareOfThreads) {
  ThreadPool::Options o = Sized(4, 100);
  o.max_running_per_key = 2;
  absl::Mutex mu;
  int running = 0, most = 0;
  absl::Notification release, other_ran;
  ThreadPool pool(o);  // last: its destructor runs the queued closures while these live
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(Queue(pool, [&] {
      {
        absl::MutexLock lock(&mu);
        most = std::max(most, ++running);
      }
      release.WaitForNotification();
      absl::MutexLock lock(&mu);
      --running;
    }, "busy"));
  }
  {
    // Two of them start; without the cap, all four threads would run "busy" closures and
    // "other" would wait for the release.
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* n) { return *n == 2; }, &running),
                                    absl::Seconds(60)));
  }
  ASSERT_TRUE(Queue(pool, [&] { other_ran.Notify(); }, "other"));
  EXPECT_TRUE(other_ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(most, 2);
  }
  release.Notify();
}

TEST(ThreadPool, AKeyQueuesAtMostItsShare) {
  ThreadPool::Options o = Sized(1, 10);
  o.max_queued_per_key = 2;
  absl::Notification release;
  ThreadPool pool(o);
  Occupy(pool, release, "x");
  EXPECT_TRUE(Queue(pool, [] {}, "a"));
  EXPECT_TRUE(Queue(pool, [] {}, "a"));
  const absl::Status refused = pool.Schedule("a", [] {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "Server busy: this client has 2 calls waiting, the most one client may queue; retry "
            "later");
  EXPECT_TRUE(Queue(pool, [] {}, "b"));  // another key still queues
  release.Notify();
}

TEST(ThreadPool, AFullQueueStillTakesKeysBelowTheirFairShare) {
  // The whole queue holds 8; a and b fill it (4 each). A third key's share is 8 / 3 = 2: it
  // still queues two, then is refused like a and b.
  ThreadPool::Options o = Sized(1, 8);
  o.max_queued_per_key = 4;
  absl::Notification release;
  std::atomic<int> ran{0};
  ThreadPool pool(o);
  Occupy(pool, release, "x");
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Queue(pool, [&] { ++ran; }, "a"));
    ASSERT_TRUE(Queue(pool, [&] { ++ran; }, "b"));
  }
  EXPECT_TRUE(Queue(pool, [&] { ++ran; }, "c"));
  EXPECT_TRUE(Queue(pool, [&] { ++ran; }, "c"));
  const absl::Status refused = pool.Schedule("c", [] {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "Server busy: 10 calls are waiting, the most it queues, and this client has 2 of "
            "them, its share; retry later");
  EXPECT_EQ(pool.Schedule("a", [] {}).code(), absl::StatusCode::kResourceExhausted);
  // A fourth key's share is 8 / 4 = 2.
  EXPECT_TRUE(Queue(pool, [&] { ++ran; }, "d"));
  EXPECT_TRUE(Queue(pool, [&] { ++ran; }, "d"));
  EXPECT_FALSE(Queue(pool, [] {}, "d"));
  release.Notify();
  // Every queued closure runs (the destructor runs what is left).
}

TEST(ThreadPool, NoKeyQueuesBeyondTwiceTheBound) {
  ThreadPool::Options o = Sized(1, 2);
  o.max_queued_per_key = 1;
  absl::Notification release;
  ThreadPool pool(o);
  Occupy(pool, release, "x");
  for (const char* key : {"a", "b", "c", "d"}) EXPECT_TRUE(Queue(pool, [] {}, key)) << key;
  EXPECT_FALSE(Queue(pool, [] {}, "e"));  // 4 waiting: twice the bound
  release.Notify();
}

}  // namespace
}  // namespace looptool::service
