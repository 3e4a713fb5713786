// ConnectionTable on its own, with explicit clock values: connection names, owners (a token's
// user or the connection), descriptor numbers reused by a newer connection, abandonment exact
// at the grace, a client that calls again within its grace, and the longest-idle connection
// (never one with a call running while another is idle).
#include "service/connection_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(ConnectionTable, CallsAreOwnedByTheirTokensUserElseTheirConnection) {
  ConnectionTable t(absl::Seconds(30));
  const uint64_t a = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  const uint64_t b = t.Opened(8, "ipv4:127.0.0.1:5001", kT0);
  EXPECT_NE(a, b);
  Caller plain = t.Identify("fd:7", "", kT0);
  EXPECT_EQ(plain.connection, "conn:ipv4:127.0.0.1:5000#1");
  EXPECT_EQ(plain.owner, plain.connection);
  Caller alice = t.Identify("fd:8", "alice", kT0);
  EXPECT_EQ(alice.connection, "conn:ipv4:127.0.0.1:5001#2");
  EXPECT_EQ(alice.owner, "user:alice");
  // A peer that is not a connection of the table names itself.
  EXPECT_EQ(t.Identify("ipv4:10.0.0.1:99", "", kT0).owner, "conn:ipv4:10.0.0.1:99");
  EXPECT_EQ(t.Identify("fd:9", "", kT0).owner, "conn:fd:9");
  EXPECT_EQ(t.open(), 2);
}

TEST(ConnectionTable, AReusedDescriptorIsTheNewConnection) {
  ConnectionTable t(absl::Seconds(30));
  const uint64_t old = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  t.Opened(7, "ipv4:127.0.0.1:6000", kT0);  // gRPC closed the old one's descriptor first
  t.Closed(old, kT0);                         // the listener learns of the old one's end later
  EXPECT_EQ(t.Identify("fd:7", "", kT0).owner, "conn:ipv4:127.0.0.1:6000#2");
  EXPECT_EQ(t.open(), 1);
}

TEST(ConnectionTable, AnOwnerIsAbandonedExactlyGraceAfterItsLastConnectionClosed) {
  ConnectionTable t(absl::Seconds(30));
  const uint64_t a = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  const uint64_t b = t.Opened(8, "ipv4:127.0.0.1:5001", kT0);
  const std::string plain = t.Identify("fd:7", "", kT0).owner;
  t.Identify("fd:7", "alice", kT0);
  t.Identify("fd:8", "alice", kT0);
  t.Closed(a, kT0 + absl::Seconds(1));
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(31) - absl::Nanoseconds(1)), IsEmpty());
  // alice still has connection b.
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(31)),
              ElementsAre(Pair(plain, kT0 + absl::Seconds(1))));
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(99)), IsEmpty());  // handed over once
  t.Closed(b, kT0 + absl::Seconds(40));
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(70)),
              ElementsAre(Pair("user:alice", kT0 + absl::Seconds(40))));
  t.Closed(b, kT0 + absl::Seconds(80));  // again: ignored
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(200)), IsEmpty());
  EXPECT_EQ(t.open(), 0);
}

TEST(ConnectionTable, AnOwnerThatCallsAgainWithinItsGraceIsNotAbandoned) {
  ConnectionTable t(absl::Seconds(30));
  const uint64_t first = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  t.Identify("fd:7", "alice", kT0);
  t.Closed(first, kT0);
  t.Opened(9, "ipv4:127.0.0.1:5002", kT0 + absl::Seconds(5));
  t.Identify("fd:9", "alice", kT0 + absl::Seconds(5));  // reconnected
  EXPECT_THAT(t.TakeAbandoned(kT0 + absl::Seconds(60)), IsEmpty());
}

TEST(ConnectionTable, LongestIdleIsTheConnectionWithTheOldestCall) {
  ConnectionTable t(absl::Seconds(30));
  EXPECT_EQ(t.LongestIdle(), std::nullopt);
  const uint64_t a = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  const uint64_t b = t.Opened(8, "ipv4:127.0.0.1:5001", kT0 + absl::Seconds(1));
  EXPECT_EQ(t.LongestIdle(), a);
  t.Identify("fd:7", "", kT0 + absl::Seconds(2));
  EXPECT_EQ(t.LongestIdle(), b);
  t.Closed(b, kT0 + absl::Seconds(3));
  EXPECT_EQ(t.LongestIdle(), a);
}

// A connection with a call running is not idle, however long ago the call started: an idle one
// goes first; among busy ones, the one whose call started earliest.
TEST(ConnectionTable, AConnectionWithACallRunningIsNotTheLongestIdle) {
  ConnectionTable t(absl::Seconds(30));
  const uint64_t a = t.Opened(7, "ipv4:127.0.0.1:5000", kT0);
  const uint64_t b = t.Opened(8, "ipv4:127.0.0.1:5001", kT0 + absl::Seconds(1));
  const Caller long_call = t.Identify("fd:7", "", kT0 + absl::Seconds(2));
  EXPECT_EQ(long_call.serial, a);
  const Caller quick = t.Identify("fd:8", "", kT0 + absl::Seconds(3));
  EXPECT_EQ(quick.serial, b);
  EXPECT_EQ(t.LongestIdle(), a);  // both busy: a's call started first
  t.CallEnded(quick, kT0 + absl::Seconds(4));
  EXPECT_EQ(t.LongestIdle(), b);  // idle since 4 s, while a's 2 s call still runs
  t.CallEnded(long_call, kT0 + absl::Seconds(5));
  EXPECT_EQ(t.LongestIdle(), b);  // a was active until 5 s
  const Caller x = t.Identify("fd:8", "", kT0 + absl::Seconds(6));
  EXPECT_EQ(t.LongestIdle(), a);
  t.Closed(a, kT0 + absl::Seconds(7));
  t.CallEnded(x, kT0 + absl::Seconds(8));
  t.CallEnded(long_call, kT0 + absl::Seconds(9));  // its connection closed: ignored
  EXPECT_EQ(t.LongestIdle(), b);
  EXPECT_EQ(t.Identify("ipv4:127.0.0.1:6000", "", kT0).serial, 0u);  // not ours
}

}  // namespace
}  // namespace looptool::service
