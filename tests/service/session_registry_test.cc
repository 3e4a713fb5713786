// SessionRegistry on its own, with explicit clock values: Add/Find/End, idle reaping exact at
// the boundary, the max_sessions refusal, and ids that are random, distinct and never reused.
#include "service/session_registry.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

// An episode that does nothing: the registry never looks inside one.
class NullEpisode : public Episode {
 public:
  std::unique_ptr<Episode> Clone() const override { return std::make_unique<NullEpisode>(); }
  const std::string& action_space_name() const override { return name_; }
  const std::vector<std::string>& action_names() const override { return names_; }
  absl::StatusOr<bool> Act(int64_t) override { return absl::InvalidArgumentError("none"); }
  absl::StatusOr<Observation> Observe(absl::string_view) const override {
    return absl::InvalidArgumentError("none");
  }
  void set_tenant(uint64_t t) override { tenant_ = t; }
  uint64_t tenant() const override { return tenant_; }

 private:
  std::string name_ = "null";
  std::vector<std::string> names_;
  uint64_t tenant_ = 0;
};

std::shared_ptr<Session> NewSession(const std::string& uri = "benchmark://t/x") {
  return std::make_shared<Session>(uri, std::make_unique<NullEpisode>());
}

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(SessionRegistry, AddFindEnd) {
  SessionRegistry r(10, /*max_per_owner=*/10);
  auto session = NewSession("benchmark://t/a");
  auto id = r.Add(session, "owner", kT0);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(r.size(), 1);
  auto found = r.Find(*id, kT0);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->get(), session.get());
  EXPECT_EQ((*found)->benchmark, "benchmark://t/a");

  auto other = r.Add(NewSession(), "owner", kT0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(r.End(*id), 1);  // returns how many remain
  EXPECT_EQ(r.End(*id), 1);  // ending it again changes nothing
  EXPECT_EQ(r.size(), 1);
  const absl::Status gone = r.Find(*id, kT0).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(gone.message(), absl::StrCat("Session not found: ", *id));
  // A handler that still holds the session keeps it alive after End.
  EXPECT_EQ(session.use_count(), 2);  // `session` and `found`
  EXPECT_TRUE(r.Find(*other, kT0).ok());
  EXPECT_EQ(r.End(*other), 0);
}

TEST(SessionRegistry, UnknownIdsAreNotFoundWithTheirId) {
  SessionRegistry r(4, /*max_per_owner=*/4);
  for (int64_t id : {int64_t{0}, int64_t{-1}, int64_t{42}, int64_t{9223372036854775807}}) {
    const absl::Status s = r.Find(id, kT0).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << id;
    EXPECT_EQ(s.message(), absl::StrCat("Session not found: ", id));
    EXPECT_EQ(r.End(id), 0);
  }
}

TEST(SessionRegistry, MaxSessionsIsResourceExhaustedUntilOneEnds) {
  SessionRegistry r(3, /*max_per_owner=*/10);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*r.Add(NewSession(), "owner", kT0));
  const absl::Status full = r.Add(NewSession(), "owner", kT0).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "Too many sessions: this server keeps at most 3 and no client holds more than this "
            "one; end some with EndSession (idle ones are reaped)");
  EXPECT_EQ(r.size(), 3);
  EXPECT_EQ(r.End(ids[1]), 2);
  EXPECT_TRUE(r.Add(NewSession(), "owner", kT0).ok());
  EXPECT_EQ(r.Add(NewSession(), "owner", kT0).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(SessionRegistry, IdleReapingIsExactAtTheBoundary) {
  const absl::Duration timeout = absl::Seconds(60);
  SessionRegistry r(10, /*max_per_owner=*/10);
  const int64_t a = *r.Add(NewSession(), "owner", kT0);
  const int64_t b = *r.Add(NewSession(), "owner", kT0 + absl::Seconds(10));
  // Unused for exactly the timeout: kept. One nanosecond more: reaped.
  EXPECT_EQ(r.ReapIdle(kT0 + timeout, timeout), 0);
  EXPECT_EQ(r.size(), 2);
  EXPECT_EQ(r.ReapIdle(kT0 + timeout + absl::Nanoseconds(1), timeout), 1);
  EXPECT_EQ(r.Find(a, kT0 + timeout).status().code(), absl::StatusCode::kNotFound);
  // Find marks a session used: b, used at t0+50, lives until t0+110.
  ASSERT_TRUE(r.Find(b, kT0 + absl::Seconds(50)).ok());
  EXPECT_EQ(r.ReapIdle(kT0 + absl::Seconds(110), timeout), 0);
  EXPECT_EQ(r.ReapIdle(kT0 + absl::Seconds(110) + absl::Nanoseconds(1), timeout), 1);
  EXPECT_EQ(r.size(), 0);
  EXPECT_EQ(r.ReapIdle(kT0 + absl::Hours(1), timeout), 0);
}

TEST(SessionRegistry, ReapingCountsOnlyTheIdleOnes) {
  const absl::Duration timeout = absl::Seconds(5);
  SessionRegistry r(100, /*max_per_owner=*/100);
  std::vector<int64_t> old_ids, fresh_ids;
  for (int i = 0; i < 7; ++i) old_ids.push_back(*r.Add(NewSession(), "owner", kT0));
  for (int i = 0; i < 4; ++i) fresh_ids.push_back(*r.Add(NewSession(), "owner", kT0 + absl::Seconds(3)));
  EXPECT_EQ(r.ReapIdle(kT0 + absl::Seconds(6), timeout), 7);
  EXPECT_EQ(r.size(), 4);
  for (int64_t id : old_ids) EXPECT_FALSE(r.Find(id, kT0).ok());
  for (int64_t id : fresh_ids) EXPECT_TRUE(r.Find(id, kT0 + absl::Seconds(6)).ok());
}

TEST(SessionRegistry, IdsAreNonNegativeDistinctAndNotSequential) {
  SessionRegistry r(100000, /*max_per_owner=*/100000);
  std::vector<int64_t> ids;
  for (int i = 0; i < 256; ++i) {
    auto id = r.Add(NewSession(), "owner", kT0);
    ASSERT_TRUE(id.ok());
    EXPECT_GE(*id, 0);
    ids.push_back(*id);
  }
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // 63 random bits: no two of 256 ids within 2^20 of each other (probability about 2^-37),
  // and they do not come in the order they were handed out.
  for (size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_GT(sorted[i] - sorted[i - 1], int64_t{1} << 20) << sorted[i - 1] << ", " << sorted[i];
  }
  EXPECT_NE(sorted, ids);
  // The high bits are used: a counter or a 32-bit draw would leave them all zero.
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [](int64_t id) { return id >> 40 != 0; }));
}

TEST(SessionRegistry, EndedIdsAreNotHandedOutAgain) {
  // Ids are drawn at random, so a reuse cannot be forced from outside; this checks that, over
  // many add/end and add/reap cycles, no id is ever handed out twice.
  SessionRegistry r(8, /*max_per_owner=*/8);
  std::set<int64_t> seen;
  absl::Time now = kT0;
  for (int i = 0; i < 4000; ++i) {
    auto id = r.Add(NewSession(), "owner", now);
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE(seen.insert(*id).second) << "id " << *id << " reused";
    if (i % 2 == 0) {
      r.End(*id);
    } else {
      now += absl::Seconds(2);
      r.ReapIdle(now, absl::Seconds(1));
    }
  }
  EXPECT_EQ(r.size(), 0);
}

TEST(SessionRegistry, OneOwnerHoldsAtMostItsCap) {
  SessionRegistry r(10, /*max_per_owner=*/2);
  ASSERT_TRUE(r.Add(NewSession(), "mallory", kT0).ok());
  ASSERT_TRUE(r.Add(NewSession(), "mallory", kT0).ok());
  const absl::Status capped = r.Add(NewSession(), "mallory", kT0).status();
  EXPECT_EQ(capped.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(capped.message()),
              ::testing::HasSubstr("Too many sessions for this client: it holds 2"));
  EXPECT_TRUE(r.Add(NewSession(), "alice", kT0).ok());  // others are not capped by it
  EXPECT_EQ(r.owned_by("mallory"), 2);
  EXPECT_EQ(r.owned_by("alice"), 1);
}

// The attack: one client fills the server. The next client still gets sessions, each
// by ending the filler's least recently used one, until both hold as many; then the server is
// full for both.
TEST(SessionRegistry, AFullServerServesTheClientHoldingFewer) {
  SessionRegistry r(4, /*max_per_owner=*/4);
  std::vector<int64_t> filler;
  for (int i = 0; i < 4; ++i) {
    filler.push_back(*r.Add(NewSession(), "mallory", kT0 + absl::Seconds(i)));
  }
  EXPECT_TRUE(r.Find(filler[0], kT0 + absl::Seconds(10)).ok());  // filler[1] is now the LRU
  const int64_t a = *r.Add(NewSession(), "alice", kT0 + absl::Seconds(11));
  EXPECT_EQ(r.Find(filler[1], kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(r.Find(filler[0], kT0).ok());
  ASSERT_TRUE(r.Add(NewSession(), "alice", kT0 + absl::Seconds(12)).ok());  // 2 to 2 now
  EXPECT_EQ(r.owned_by("mallory"), 2);
  EXPECT_EQ(r.owned_by("alice"), 2);
  EXPECT_EQ(r.size(), 4);
  // Neither may take from the other any more, nor may mallory take back.
  EXPECT_EQ(r.Add(NewSession(), "alice", kT0).status().code(),
            absl::StatusCode::kResourceExhausted);
  const absl::Status back = r.Add(NewSession(), "mallory", kT0).status();
  EXPECT_EQ(back.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(back.message()), ::testing::HasSubstr("Too many sessions"));
  // A third client holding none takes one from the largest holder (a tie: the first by name).
  ASSERT_TRUE(r.Add(NewSession(), "carol", kT0).ok());
  EXPECT_EQ(r.owned_by("alice"), 1);
  EXPECT_EQ(r.Find(a, kT0).status().code(), absl::StatusCode::kNotFound);  // alice's LRU
  EXPECT_EQ(r.owned_by("mallory"), 2);
  EXPECT_EQ(r.owned_by("carol"), 1);
  EXPECT_EQ(r.size(), 4);
}

// The service asks before it builds an episode: the check gives Add's answer and changes
// nothing (no session of the largest holder ends for a check).
TEST(SessionRegistry, CheckRoomForAnswersAsAddWouldAndEndsNothing) {
  SessionRegistry r(3, /*max_per_owner=*/2);
  ASSERT_TRUE(r.Add(NewSession(), "mallory", kT0).ok());
  ASSERT_TRUE(r.Add(NewSession(), "mallory", kT0).ok());
  const absl::Status capped = r.CheckRoomFor("mallory");
  EXPECT_EQ(capped.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(capped.message(), r.Add(NewSession(), "mallory", kT0).status().message());
  EXPECT_TRUE(r.CheckRoomFor("alice").ok());
  ASSERT_TRUE(r.Add(NewSession(), "alice", kT0).ok());  // full now
  EXPECT_TRUE(r.CheckRoomFor("carol").ok());  // room by ending one of mallory's ...
  EXPECT_EQ(r.owned_by("mallory"), 2);        // ... which the check does not do
  EXPECT_EQ(r.size(), 3);
  EXPECT_EQ(r.CheckRoomFor("alice").code(), absl::StatusCode::kResourceExhausted);
}

// A client left at kT0 + 5 s: its sessions unused since then end; one used after (it came back)
// stays, and so do other owners' sessions.
TEST(SessionRegistry, EndOwnedByEndsThatOwnersSessionsUnusedSinceItLeft) {
  SessionRegistry r(10, 10);
  const int64_t m1 = *r.Add(NewSession(), "conn:a", kT0);
  const int64_t m2 = *r.Add(NewSession(), "conn:a", kT0 + absl::Seconds(5));  // at the boundary
  const int64_t used = *r.Add(NewSession(), "conn:a", kT0);
  const int64_t other = *r.Add(NewSession(), "conn:b", kT0);
  ASSERT_TRUE(r.Find(used, kT0 + absl::Seconds(6)).ok());
  EXPECT_EQ(r.EndOwnedBy("conn:a", kT0 + absl::Seconds(5)), 2);
  EXPECT_EQ(r.Find(m1, kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.Find(m2, kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(r.Find(used, kT0).ok());
  EXPECT_TRUE(r.Find(other, kT0).ok());
  EXPECT_EQ(r.owned_by("conn:a"), 1);
  EXPECT_EQ(r.size(), 2);
}

}  // namespace
}  // namespace looptool::service
