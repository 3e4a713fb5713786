// RequestLog: one session per request id, however many attempts arrive and in whatever order.
#include "service/request_log.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/service/eventually.h"

namespace looptool::service {
namespace {

using ::looptool::testing::Eventually;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

TEST(RequestLog, AFinishedRequestIsFoundByItsClientAndIdOnly) {
  RequestLog log(/*capacity=*/16, /*ttl=*/absl::Minutes(10), /*wait=*/absl::Seconds(1));
  absl::StatusOr<RequestLog::Begun> first = log.Begin("a", "1", kT0);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->made.has_value());
  first->claim.Finish(7, kT0);
  absl::StatusOr<RequestLog::Begun> again = log.Begin("a", "1", kT0 + absl::Minutes(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->made, 7);
  for (const auto& [client, request] : {std::pair("b", "1"), std::pair("a", "2")}) {
    absl::StatusOr<RequestLog::Begun> other = log.Begin(client, request, kT0);
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(other->made.has_value()) << client << " " << request;
  }
  // Past the ttl the request is claimed again.
  absl::StatusOr<RequestLog::Begun> late = log.Begin("a", "1", kT0 + absl::Minutes(11));
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->made.has_value());
}

TEST(RequestLog, NoRequestIdClaimsNothing) {
  RequestLog log(16, absl::Minutes(10), absl::Seconds(1));
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", "", kT0);
    ASSERT_TRUE(begun.ok());
    EXPECT_FALSE(begun->made.has_value());
    begun->claim.Finish(i, kT0);
  }
  absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", "", kT0);
  ASSERT_TRUE(begun.ok());
  EXPECT_FALSE(begun->made.has_value());
}

TEST(RequestLog, AnAttemptWhileTheFirstRunsIsRefusedAfterItsWait) {
  RequestLog log(16, absl::Minutes(10), /*wait=*/absl::Milliseconds(20));
  absl::StatusOr<RequestLog::Begun> first = log.Begin("a", "1", kT0);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<RequestLog::Begun> second = log.Begin("a", "1", kT0);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("still running"), absl::string_view::npos);
}

TEST(RequestLog, AnAttemptWhileTheFirstRunsGetsTheSessionItMakes) {
  RequestLog log(16, absl::Minutes(10), absl::Seconds(60));
  absl::StatusOr<RequestLog::Begun> first = log.Begin("a", "1", kT0);
  ASSERT_TRUE(first.ok());
  std::optional<int64_t> seen;
  std::thread second([&] {
    absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", "1", kT0);
    ASSERT_TRUE(begun.ok());
    seen = begun->made;
  });
  ASSERT_TRUE(Eventually([&] { return log.Waiting() == 1; }, absl::Seconds(30),
                         absl::Milliseconds(1)));
  first->claim.Finish(42, kT0);
  second.join();
  EXPECT_EQ(seen, 42);
  EXPECT_EQ(log.Waiting(), 0);
}

TEST(RequestLog, WhenTheFirstAttemptFailsTheNextRunsInItsPlace) {
  RequestLog log(16, absl::Minutes(10), absl::Seconds(60));
  std::optional<absl::StatusOr<RequestLog::Begun>> first = log.Begin("a", "1", kT0);
  ASSERT_TRUE(first->ok());
  std::optional<int64_t> seen;
  bool claimed = false;
  std::thread second([&] {
    absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", "1", kT0);
    ASSERT_TRUE(begun.ok());
    seen = begun->made;
    claimed = true;
    begun->claim.Finish(9, kT0);
  });
  ASSERT_TRUE(Eventually([&] { return log.Waiting() == 1; }, absl::Seconds(30),
                         absl::Milliseconds(1)));
  first.reset();  // failed: its claim is dropped without Finish
  second.join();
  EXPECT_TRUE(claimed);
  EXPECT_FALSE(seen.has_value());
  absl::StatusOr<RequestLog::Begun> third = log.Begin("a", "1", kT0);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->made, 9);
}

TEST(RequestLog, ManyConcurrentAttemptsMakeOneSession) {
  RequestLog log(1024, absl::Minutes(10), absl::Seconds(60));
  constexpr int kRequests = 50;
  constexpr int kAttempts = 4;
  std::atomic<int> made{0};
  std::vector<std::vector<int64_t>> answers(kRequests, std::vector<int64_t>(kAttempts, -1));
  std::vector<std::thread> threads;
  for (int a = 0; a < kAttempts; ++a) {
    threads.emplace_back([&, a] {
      for (int r = 0; r < kRequests; ++r) {
        absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", std::to_string(r), kT0);
        ASSERT_TRUE(begun.ok());
        if (begun->made.has_value()) {
          answers[r][a] = *begun->made;
        } else {
          const int64_t session = 1000 + made.fetch_add(1);
          answers[r][a] = session;
          begun->claim.Finish(session, kT0);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(made.load(), kRequests);
  for (int r = 0; r < kRequests; ++r) {
    for (int a = 1; a < kAttempts; ++a) EXPECT_EQ(answers[r][a], answers[r][0]) << r;
  }
}

TEST(RequestLog, ForgottenAndEvictedRequestsAreClaimedAgain) {
  RequestLog log(/*capacity=*/2, absl::Minutes(10), absl::Seconds(1));
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<RequestLog::Begun> begun = log.Begin("a", std::to_string(r), kT0);
    ASSERT_TRUE(begun.ok());
    begun->claim.Finish(r, kT0);
  }
  EXPECT_FALSE(log.Begin("a", "0", kT0)->made.has_value());  // the oldest of three: evicted
  EXPECT_EQ(log.Begin("a", "2", kT0)->made, 2);
  log.Forget("a", "2", /*session=*/5);  // another session: kept
  EXPECT_EQ(log.Begin("a", "2", kT0)->made, 2);
  log.Forget("a", "2", 2);
  EXPECT_FALSE(log.Begin("a", "2", kT0)->made.has_value());
}

}  // namespace
}  // namespace looptool::service
