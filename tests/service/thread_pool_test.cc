// ThreadPool on its own: everything scheduled runs on the pool's threads, the queue refuses work
// beyond max_queued, and the destructor runs what is queued before it joins.
#include "service/thread_pool.h"

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

TEST(ThreadPool, RunsEverythingScheduledOnItsOwnThreads) {
  std::atomic<int> ran{0};
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  {
    ThreadPool pool(3, 10000);
    for (int i = 0; i < 2000; ++i) {
      ASSERT_TRUE(pool.Schedule([&] {
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
  ThreadPool pool(2, 10);
  absl::Notification a_started, b_started, both_done_a, both_done_b;
  ASSERT_TRUE(pool.Schedule([&] {
    a_started.Notify();
    if (b_started.WaitForNotificationWithTimeout(absl::Seconds(30))) both_done_a.Notify();
  }));
  ASSERT_TRUE(pool.Schedule([&] {
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
    ThreadPool pool(1, 2);
    absl::Notification started, release;
    ASSERT_TRUE(pool.Schedule([&] {
      started.Notify();
      release.WaitForNotification();
    }));
    started.WaitForNotification();  // the one thread is busy; the queue is empty
    EXPECT_TRUE(pool.Schedule([&] { ++ran; }));
    EXPECT_TRUE(pool.Schedule([&] { ++ran; }));
    EXPECT_FALSE(pool.Schedule([&] { dropped_ran = true; }));
    EXPECT_FALSE(pool.Schedule([&] { dropped_ran = true; }));
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 2);
  EXPECT_FALSE(dropped_ran.load());
}

TEST(ThreadPool, RoomFreesAsTheQueueDrains) {
  ThreadPool pool(1, 1);
  absl::Notification started, release;
  ASSERT_TRUE(pool.Schedule([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  absl::Notification second_ran;
  EXPECT_TRUE(pool.Schedule([&] { second_ran.Notify(); }));
  EXPECT_FALSE(pool.Schedule([] {}));
  release.Notify();
  second_ran.WaitForNotification();  // the queue is empty again
  absl::Notification third_ran;
  EXPECT_TRUE(pool.Schedule([&] { third_ran.Notify(); }));
  EXPECT_TRUE(third_ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

TEST(ThreadPool, DestructorRunsQueuedClosuresInOrderThenJoins) {
  std::vector<int> order;  // written by the pool's one thread only
  std::atomic<bool> refused_while_stopping{false};
  absl::Notification started;
  auto pool = std::make_unique<ThreadPool>(1, 100);
  ThreadPool* raw = pool.get();
  // The pool's one thread is held until the destructor has begun.
  ASSERT_TRUE(pool->Schedule([&, raw] {
    started.Notify();
    while (!raw->stopping()) std::this_thread::yield();
  }));
  started.WaitForNotification();
  EXPECT_FALSE(raw->stopping());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool->Schedule([&order, i] { order.push_back(i); }));
  // Work queued while the pool is being destroyed is refused.
  ASSERT_TRUE(raw->Schedule([&, raw] { refused_while_stopping = !raw->Schedule([] {}); }));
  pool.reset();  // returns only when every queued closure has run
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(refused_while_stopping.load());
}

}  // namespace
}  // namespace looptool::service
