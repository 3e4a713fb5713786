// The worker pool runs kernels in child processes: measurements come back and are cached, and a
// kernel that crashes or hangs fails only its own request while the pool replaces the worker.
#include "backend/timing/worker_pool.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "backend/timing/worker_main.h"
#include "tests/faults/fault_kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::InitialTree;
using testing::WithActions;

std::unique_ptr<WorkerPool> StartPool(double deadline_seconds = 30) {
  WorkerPool::Options o;
  o.budget_ms = 1;
  o.deadline_seconds = deadline_seconds;
  auto pool = WorkerPool::Start(o);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

TEST(WorkerPool, MeasuresInAWorkerAndCaches) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  // The worker's measured peak: at least one FMA of the detected ISA's width every 2 ns on any
  // real core, far below 1000.
  const absl::StatusOr<double> measured_peak = pool->PeakGflops();
  ASSERT_TRUE(measured_peak.ok()) << measured_peak.status();
  const double peak = *measured_peak;
  EXPECT_GE(peak, Traits(DetectIsa()).vector_width);
  EXPECT_LT(peak, 1000.0);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  auto a = pool->MeasureFor(t, 0);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->seconds, 0);
  EXPECT_NEAR(a->gflops, 2.0 * 32 * 48 * 16 / a->seconds * 1e-9, 1e-9 * a->gflops);
  auto b = pool->MeasureFor(WithActions(t, "down"), 0);  // same schedule: cached, same number
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->seconds, a->seconds);
  ASSERT_TRUE(pool->MeasureFor(WithActions(t, "split_4"), 0).ok());
  EXPECT_EQ(pool->stats().cache_hits, 1);
  EXPECT_EQ(pool->stats().measured, 3);  // the peak and two schedules
}

TEST(WorkerPool, CoresThisProcessCannotUseAreRefusedBeforeAnyWorkerStarts) {
  // A CPU the machine does not have (a worker would silently run unpinned there) and one past
  // what a CPU set can name; beside a usable core, so the first core is not the only one checked.
  for (int cpu : {CPU_SETSIZE - 1, CPU_SETSIZE}) {
    WorkerPool::Options o;
    o.cores = {0, cpu};
    auto pool = WorkerPool::Start(o);
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(pool.status().message()),
                ::testing::HasSubstr(absl::StrCat("cannot run a kernel worker on cpu ", cpu)));
  }
}

TEST(WorkerPool, MemoryComesFromAWorkerOnceAndIsKept) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  const auto memory = pool->Memory();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->levels.back().name, "DRAM");
  ASSERT_FALSE(memory->bandwidth.empty());
  for (const BandwidthPoint& p : memory->bandwidth) EXPECT_GT(p.gbytes_per_second, 0) << p.bytes;
  const int64_t calls = pool->stats().measured;  // the peak and the memory
  ASSERT_TRUE(pool->Memory().ok());
  EXPECT_EQ(pool->stats().measured, calls);      // no second worker call
  EXPECT_EQ(calls, 2);
}

TEST(WorkerPool, CrashingKernelFailsOneRequestAndTheWorkerIsReplaced) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  const absl::Status crash = pool->RunExtension("crash");
  EXPECT_EQ(crash.code(), absl::StatusCode::kInternal) << crash;
  EXPECT_THAT(std::string(crash.message()), ::testing::HasSubstr("crashed"));
  EXPECT_EQ(pool->stats().crashes, 1);
  auto m = pool->MeasureFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"), 0);
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(WorkerPool, HangingKernelHitsTheDeadlineAndTheWorkerIsReplaced) {
  // (2 s: the measurement after the hang starts a new worker, under ASan too, well within it.)
  auto pool = StartPool(/*deadline_seconds=*/2);
  ASSERT_NE(pool, nullptr);
  const absl::Status hang = pool->RunExtension("hang");
  EXPECT_EQ(hang.code(), absl::StatusCode::kDeadlineExceeded) << hang;
  EXPECT_EQ(pool->stats().timeouts, 1);
  auto m = pool->MeasureFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"), 0);
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(WorkerPool, KernelsTooCostlyToEvaluateAreRefusedBeforeTheyRun) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  // The mm2048_2048_2048: ~30 s in the reference interpreter alone.
  const LoopTree huge = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=2048 n=2048 k=2048");
  auto m = pool->MeasureFor(huge, 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted) << m.status();
  EXPECT_THAT(std::string(m.status().message()),
              ::testing::HasSubstr("Kernel too costly to evaluate on this server: 17.2 GFLOP"));
  EXPECT_EQ(pool->stats().refused, 1);
  EXPECT_EQ(pool->stats().measured, 1);  // the peak only: no worker was asked
}

TEST(WorkerPool, PrepareHintsRunTheReferenceInAWorkerOncePerProgram) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  pool->PrepareFor(t, 1);
  pool->WaitForPrepares();
  EXPECT_EQ(pool->stats().prepared, 1);
  EXPECT_GT(pool->stats().prepare_seconds, 0);
  EXPECT_EQ(pool->stats().measured, 1);  // the peak: a hint is no measurement
  // The same program again (any schedule): not sent.
  pool->PrepareFor(WithActions(t, "split_4"), 2);
  EXPECT_EQ(pool->stats().prepares_skipped, 1);
  // One MeasureFor would refuse: not sent either.
  pool->PrepareFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=2048 n=2048 k=2048"), 1);
  EXPECT_EQ(pool->stats().prepares_skipped, 2);
  pool->WaitForPrepares();
  EXPECT_EQ(pool->stats().prepared, 1);
  EXPECT_EQ(pool->stats().prepares_cached, 0);
  EXPECT_EQ(pool->stats().prepares_failed, 0);
  // The measurement finds the reference made.
  auto m = pool->MeasureFor(t, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  // A program the worker measured before it was hinted: the worker has its reference.
  const LoopTree u = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16");
  ASSERT_TRUE(pool->MeasureFor(u, 1).ok());
  pool->PrepareFor(u, 1);
  pool->WaitForPrepares();
  EXPECT_EQ(pool->stats().prepared, 1);
  EXPECT_EQ(pool->stats().prepares_cached, 1);
}

TEST(WorkerPool, PrepareHintsAreBoundedPerTenantAndInAllAndIgnoredAfterStop) {
  WorkerPool::Options o;
  o.budget_ms = 1;
  o.max_pending_prepares = 0;  // none may wait: every hint dropped
  auto none = WorkerPool::Start(o);
  ASSERT_TRUE(none.ok()) << none.status();
  for (int n = 100; n < 106; ++n) {
    (*none)->PrepareFor(InitialTree(absl::StrCat("B[n,m] = A[m,n]; m=300 n=", n)), n);
  }
  (*none)->WaitForPrepares();
  EXPECT_EQ((*none)->stats().prepares_skipped, 6);
  EXPECT_EQ((*none)->stats().prepared, 0);

  // Hints that are never sent, so that what waits is known: two at most, one per tenant.
  o.max_pending_prepares = 2;
  o.send_prepares = false;
  auto started = WorkerPool::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<WorkerPool> pool = *std::move(started);
  pool->PrepareFor(InitialTree("B[n,m] = A[m,n]; m=600 n=100"), 1);  // waits
  pool->PrepareFor(InitialTree("B[n,m] = A[m,n]; m=600 n=101"), 1);  // tenant 1's waits already
  EXPECT_EQ(pool->stats().prepares_skipped, 1);
  pool->PrepareFor(InitialTree("B[n,m] = A[m,n]; m=600 n=102"), 2);  // waits
  pool->PrepareFor(InitialTree("B[n,m] = A[m,n]; m=600 n=103"), 3);  // two wait already
  EXPECT_EQ(pool->stats().prepares_skipped, 2);
  pool->Stop();  // returns with hints waiting
  pool->WaitForPrepares();  // returns once the pool stopped
  // After Stop: ignored, not counted (two still wait: it would count as skipped otherwise).
  pool->PrepareFor(InitialTree("B[n,m] = A[m,n]; m=600 n=99"), 4);
  EXPECT_EQ(pool->stats().prepares_skipped, 2);
  auto m = pool->MeasureFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"), 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
}

TEST(WorkerPool, TenantsAreServedInTurn) {
  WorkerPool::Options o;
  // Each of tenant 1's kernels is timed for 20 ms: the counts below are read by this thread
  // around tenant 2's request, and a thread descheduled for less than a kernel's time cannot
  // let an extra one finish inside the window.
  o.budget_ms = 20;
  auto started = WorkerPool::Start(o);  // one worker
  ASSERT_TRUE(started.ok());
  WorkerPool& pool = **started;
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=96 n=96 k=96");
  const std::vector<std::string> schedules = {
      "split_2", "split_4", "split_8", "split_16", "down, split_2", "down, split_4",
      "down, split_8", "down, split_16", "down, down, split_2", "down, down, split_4",
      "down, down, split_8", "down, down, split_16", "split_32", "down, split_32",
      "down, down, split_32", "down, swap_down"};
  absl::Mutex mu;
  std::vector<std::string> finished;
  // Tenant 1 floods the queue with 16 new schedules from 8 threads...
  std::vector<std::thread> flood;
  for (int i = 0; i < 8; ++i) {
    flood.emplace_back([&, i] {
      for (int j = i; j < static_cast<int>(schedules.size()); j += 8) {
        ASSERT_TRUE(pool.MeasureFor(WithActions(t, schedules[j]), 1).ok());
        absl::MutexLock lock(&mu);
        finished.push_back("flood");
      }
    });
  }
  // ... and once seven of them wait for the one worker (the eighth runs), tenant 2 asks for
  // one kernel: it waits for at most the one running and one more of tenant 1's, not all.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (pool.stats().waiting < 7 && absl::Now() < give_up) std::this_thread::yield();
  ASSERT_EQ(pool.stats().waiting, 7) << "tenant 1's requests never queued up";
  size_t done_before = 0;
  {
    absl::MutexLock lock(&mu);
    done_before = finished.size();
  }
  ASSERT_TRUE(pool.MeasureFor(WithActions(t, "swap_down"), 2).ok());
  size_t done_after = 0;
  {
    absl::MutexLock lock(&mu);
    done_after = finished.size();
  }
  for (auto& th : flood) th.join();
  EXPECT_LE(done_after - done_before, 2u) << "tenant 2 waited for " << done_after - done_before
                                          << " of tenant 1's kernels";
  EXPECT_LT(done_after, schedules.size());
}

TEST(WorkerPool, AWorkerThatDiesWhileIdleIsReplacedAndReaped) {
  WorkerPool::Options o;
  o.budget_ms = 1;
  o.monitor_period_seconds = 0.05;
  auto started = WorkerPool::Start(o);
  ASSERT_TRUE(started.ok());
  WorkerPool& pool = **started;
  const pid_t victim = pool.worker_pids()[0];
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);  // our own child
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (pool.stats().idle_deaths == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(pool.stats().idle_deaths, 1);
  // Reaped (no zombie left) and replaced by a new process.
  EXPECT_NE(pool.worker_pids()[0], victim);
  EXPECT_GT(pool.worker_pids()[0], 0);
  EXPECT_EQ(waitpid(victim, nullptr, WNOHANG), -1);
  // The next request is not charged with the death.
  auto m = pool.MeasureFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"), 0);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(pool.stats().crashes, 0);
}

// Stop ends the worker processes now, whoever else holds the pool, and later calls say why.
TEST(WorkerPool, StopEndsTheWorkersAndLaterCallsFailUnavailable) {
  std::shared_ptr<WorkerPool> pool = StartPool();
  ASSERT_NE(pool, nullptr);
  const std::shared_ptr<WorkerPool> other_owner = pool;
  const std::vector<pid_t> pids = pool->worker_pids();
  ASSERT_FALSE(pids.empty());
  pool->Stop();
  for (pid_t pid : pids) {
    EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1) << pid;  // reaped: no child of ours any more
  }
  for (pid_t pid : pool->worker_pids()) EXPECT_EQ(pid, -1);
  const absl::StatusOr<Measurement> m =
      other_owner->MeasureFor(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"), 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr("stopped"));
  pool->Stop();  // idempotent
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv,
                                               looptool::testing::FaultWorkerExtension())) {
    return *rc;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
