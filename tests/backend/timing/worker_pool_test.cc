// The worker pool runs kernels in child processes: measurements come back and are cached, and a
// kernel that crashes or hangs fails only its own request while the pool replaces the worker.
#include "backend/timing/worker_pool.h"

#include "backend/timing/worker_main.h"
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
  EXPECT_GT(pool->PeakGflops(), 0);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  auto a = pool->Measure(t);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->seconds, 0);
  EXPECT_NEAR(a->gflops, 2.0 * 32 * 48 * 16 / a->seconds * 1e-9, 1e-9 * a->gflops);
  auto b = pool->Measure(WithActions(t, "down"));  // same schedule: cached, same number
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->seconds, a->seconds);
  ASSERT_TRUE(pool->Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(pool->stats().cache_hits, 1);
  EXPECT_EQ(pool->stats().measured, 3);  // the peak and two schedules
}

TEST(WorkerPool, CrashingKernelFailsOneRequestAndTheWorkerIsReplaced) {
  auto pool = StartPool();
  ASSERT_NE(pool, nullptr);
  const absl::Status crash = pool->RunFault(WorkerTask::kCrash);
  EXPECT_EQ(crash.code(), absl::StatusCode::kInternal) << crash;
  EXPECT_THAT(std::string(crash.message()), ::testing::HasSubstr("crashed"));
  EXPECT_EQ(pool->stats().crashes, 1);
  auto m = pool->Measure(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"));
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(WorkerPool, HangingKernelHitsTheDeadlineAndTheWorkerIsReplaced) {
  auto pool = StartPool(/*deadline_seconds=*/0.5);
  ASSERT_NE(pool, nullptr);
  const absl::Status hang = pool->RunFault(WorkerTask::kHang);
  EXPECT_EQ(hang.code(), absl::StatusCode::kDeadlineExceeded) << hang;
  EXPECT_EQ(pool->stats().timeouts, 1);
  auto m = pool->Measure(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16"));
  EXPECT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
