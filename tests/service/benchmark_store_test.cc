// BenchmarkStore on its own: per-client programs, immutable built-ins, exact byte accounting
// (URI + program text), eviction by the client cap, and the total cap and max_clients shared
// fairly between owners.
#include "service/benchmark_store.h"

#include <string>

#include "datasets/matmul_range.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

using ::testing::HasSubstr;

constexpr char kProgram[] = "y[m] += A[m,k] * x[k]; m=64 k=128";  // 33 bytes
constexpr char kBuiltin[] = "benchmark://mm64_256_16_range-v0/mm64_80_96";

// URIs of 22 bytes each: with kProgram, every entry below is 55 bytes.
std::string U(int i) { return "benchmark://user-v0/p" + std::to_string(i); }
constexpr int64_t kEntry = 22 + 33;

bool Has(const BenchmarkStore& s, const std::string& client, const std::string& uri) {
  return s.Load(client, uri).ok();
}

TEST(BenchmarkStore, BytesAreUriPlusProgramText) {
  ASSERT_EQ(U(1).size(), 22u);
  ASSERT_EQ(std::string(kProgram).size(), 33u);
  BenchmarkStore s(Limits{}, 1 << 20, 1 << 22);
  ASSERT_TRUE(s.Add("a", "owner-a", U(1), kProgram).ok());
  EXPECT_EQ(s.size_in_bytes("a"), kEntry);
  const std::string longer = std::string(kProgram) + "   ";
  ASSERT_TRUE(s.Add("a", "owner-a", "file:///x.lt", longer).ok());
  EXPECT_EQ(s.size_in_bytes("a"), kEntry + 12 + 36);
  // Replacing a URI's program counts the new one only.
  ASSERT_TRUE(s.Add("a", "owner-a", U(1), longer).ok());
  EXPECT_EQ(s.size_in_bytes("a"), 22 + 36 + 12 + 36);
  EXPECT_EQ(s.total_size_in_bytes(), 22 + 36 + 12 + 36);
  EXPECT_EQ(s.size_in_bytes("b"), 0);
}

TEST(BenchmarkStore, ProgramsArePerClient) {
  BenchmarkStore s(Limits{}, 1 << 20, 1 << 22);
  ASSERT_TRUE(s.Add("a", "owner-a", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("b", "owner-b", U(1), "s[m] += A[m,n]; m=8 n=8").ok());
  auto a = s.Load("a", U(1));
  auto b = s.Load("b", U(1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->Flops(), 2 * 64 * 128);
  EXPECT_EQ((*b)->Flops(), 8 * 8);
  const absl::Status c = s.Load("c", U(1)).status();
  EXPECT_EQ(c.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.message(), "Benchmark not found: " + U(1));
  // Built-ins resolve for every client, without AddBenchmark.
  auto builtin = s.Load("c", kBuiltin);
  ASSERT_TRUE(builtin.ok()) << builtin.status();
  EXPECT_EQ((*builtin)->Flops(), 2 * 64 * 80 * 96);
}

TEST(BenchmarkStore, UnknownUrisAreNotFound) {
  BenchmarkStore s(Limits{}, 1 << 20, 1 << 22);
  for (const std::string uri : {"benchmark://nope/x", "benchmark://mm64_256_16_range-v0/oops",
                                "has space", ""}) {
    const absl::Status st = s.Load("a", uri).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << uri;
    EXPECT_EQ(st.message(), "Benchmark not found: " + uri);
  }
}

TEST(BenchmarkStore, BuiltInsOverTheCapsAreInvalidArgument) {
  Limits small;
  small.max_extent = 64;
  BenchmarkStore s(small, 1 << 20, 1 << 22);
  const absl::Status st = s.Load("a", kBuiltin).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(std::string("Benchmark ") + kBuiltin +
                                      " is over this server's caps: "));
}

TEST(BenchmarkStore, BuiltInsAreImmutableUnlessTheSameProgram) {
  BenchmarkStore s(Limits{}, 1 << 20, 1 << 22);
  const absl::Status other = s.Add("a", "owner-a", kBuiltin, kProgram);
  EXPECT_EQ(other.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(other.message(),
            std::string("Benchmark ") + kBuiltin +
                " is built in and cannot be replaced; add your program under a URI of your own");
  // The same matmul with other sizes is another program.
  EXPECT_EQ(s.Add("a", "owner-a", kBuiltin, datasets::MatmulProgram({64, 80, 112})).code(),
            absl::StatusCode::kAlreadyExists);
  // Its own program, however spelled, is accepted and stores nothing.
  EXPECT_TRUE(s.Add("a", "owner-a", kBuiltin, datasets::MatmulProgram({64, 80, 96})).ok());
  EXPECT_TRUE(s.Add("a", "owner-a", kBuiltin, "C[m,n]   +=  A[m,k]*B[k,n]; m=64 n=80 k=96").ok());
  EXPECT_EQ(s.size_in_bytes("a"), 0);
  EXPECT_EQ(s.total_size_in_bytes(), 0);
  EXPECT_EQ((*s.Load("a", kBuiltin))->Flops(), 2 * 64 * 80 * 96);
}

TEST(BenchmarkStore, MalformedUrisAndProgramsAreRefused) {
  BenchmarkStore s(Limits{}, 1 << 20, 1 << 22);
  for (const std::string& uri :
       {std::string(""), std::string("benchmark://x/mm 64"), std::string("a\tb"),
        std::string("a\nb"), std::string("a\x7f"), std::string("caf\xc3\xa9"),
        std::string(1025, 'u')}) {
    const absl::Status st = s.Add("a", "owner-a", uri, kProgram);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << uri;
    EXPECT_THAT(st.message(), HasSubstr("Benchmark URI must be one token of printable"));
  }
  EXPECT_TRUE(s.Add("a", "owner-a", std::string(1024, 'u'), kProgram).ok());  // the longest allowed
  const absl::Status bad = s.Add("a", "owner-a", U(1), "C[m] += ; m=4");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("Malformed program for benchmark " + U(1) + ": "));
  EXPECT_FALSE(Has(s, "a", U(1)));
  EXPECT_EQ(s.size_in_bytes("a"), 1024 + 33);
}

TEST(BenchmarkStore, ClientCapEvictsThatClientsOldestFirst) {
  BenchmarkStore s(Limits{}, 10 * kEntry, 100 * kEntry);
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(s.Add("a", "owner-a", U(i), kProgram).ok());
  ASSERT_TRUE(s.Add("b", "owner-b", U(1), kProgram).ok());
  EXPECT_EQ(s.size_in_bytes("a"), 4 * kEntry);
  EXPECT_EQ(s.max_size_in_bytes("a"), 10 * kEntry);

  // Exactly three entries fit: the oldest goes.
  EXPECT_EQ(s.set_max_size_in_bytes("a", "owner-a", 3 * kEntry), 3 * kEntry);
  EXPECT_FALSE(Has(s, "a", U(1)));
  EXPECT_TRUE(Has(s, "a", U(2)) && Has(s, "a", U(3)) && Has(s, "a", U(4)));
  EXPECT_EQ(s.size_in_bytes("a"), 3 * kEntry);
  // One byte short of three: the next oldest goes too.
  EXPECT_EQ(s.set_max_size_in_bytes("a", "owner-a", 3 * kEntry - 1), 3 * kEntry - 1);
  EXPECT_FALSE(Has(s, "a", U(2)));
  EXPECT_TRUE(Has(s, "a", U(3)) && Has(s, "a", U(4)));
  EXPECT_EQ(s.size_in_bytes("a"), 2 * kEntry);
  // Adding beyond the cap evicts the oldest again; re-adding a URI makes it the newest.
  ASSERT_TRUE(s.Add("a", "owner-a", U(3), kProgram).ok());
  ASSERT_TRUE(s.Add("a", "owner-a", U(5), kProgram).ok());
  EXPECT_FALSE(Has(s, "a", U(4)));
  EXPECT_TRUE(Has(s, "a", U(3)) && Has(s, "a", U(5)));
  // Another client's cache is untouched by all of this.
  EXPECT_TRUE(Has(s, "b", U(1)));
  EXPECT_EQ(s.size_in_bytes("b"), kEntry);
  EXPECT_EQ(s.max_size_in_bytes("b"), 10 * kEntry);
  EXPECT_EQ(s.total_size_in_bytes(), 3 * kEntry);

  // The cap is clamped to [0, max_client_bytes]; 0 empties the cache.
  EXPECT_EQ(s.set_max_size_in_bytes("a", "owner-a", int64_t{1} << 40), 10 * kEntry);
  EXPECT_EQ(s.set_max_size_in_bytes("a", "owner-a", -5), 0);
  EXPECT_EQ(s.size_in_bytes("a"), 0);
  EXPECT_FALSE(Has(s, "a", U(5)));
  EXPECT_EQ(s.total_size_in_bytes(), kEntry);
}

TEST(BenchmarkStore, TotalCapEvictsTheOldestOfTheOwnerHoldingMost) {
  BenchmarkStore s(Limits{}, 10 * kEntry, 3 * kEntry);
  ASSERT_TRUE(s.Add("a", "owner-a", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("b", "owner-b", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("a", "owner-a", U(2), kProgram).ok());
  EXPECT_EQ(s.total_size_in_bytes(), 3 * kEntry);  // exactly at the cap: nothing goes
  EXPECT_TRUE(Has(s, "a", U(1)) && Has(s, "b", U(1)) && Has(s, "a", U(2)));
  // b adds: a and b hold 2 each (a tie goes to the first owner by name): a's oldest goes.
  ASSERT_TRUE(s.Add("b", "owner-b", U(2), kProgram).ok());
  EXPECT_FALSE(Has(s, "a", U(1)));
  EXPECT_TRUE(Has(s, "b", U(1)) && Has(s, "a", U(2)) && Has(s, "b", U(2)));
  // b adds again: now b holds the most (3 to 1) and loses its own oldest.
  ASSERT_TRUE(s.Add("b", "owner-b", U(3), kProgram).ok());
  EXPECT_FALSE(Has(s, "b", U(1)));
  EXPECT_TRUE(Has(s, "a", U(2)) && Has(s, "b", U(2)) && Has(s, "b", U(3)));
  EXPECT_EQ(s.size_in_bytes("a"), kEntry);
  EXPECT_EQ(s.size_in_bytes("b"), 2 * kEntry);
  EXPECT_EQ(s.total_size_in_bytes(), 3 * kEntry);
}

TEST(BenchmarkStore, MaxClientsReplacesTheStalestCacheOfTheOwnerHoldingMost) {
  BenchmarkStore s(Limits{}, 10 * kEntry, 100 * kEntry, /*max_clients=*/3);
  ASSERT_TRUE(s.Add("a", "alice", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("b", "mallory", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("c", "mallory", U(1), kProgram).ok());
  EXPECT_EQ(s.set_max_size_in_bytes("b", "mallory", 5 * kEntry), 5 * kEntry);
  // A third owner's cache replaces mallory's stalest (mallory holds 2, carol would hold 1).
  ASSERT_TRUE(s.Add("d", "carol", U(1), kProgram).ok());
  EXPECT_FALSE(Has(s, "b", U(1)));
  EXPECT_EQ(s.max_size_in_bytes("b"), 10 * kEntry);  // its cap went with its cache
  EXPECT_TRUE(Has(s, "a", U(1)) && Has(s, "c", U(1)) && Has(s, "d", U(1)));
  // Now each holds one: a fourth owner has nothing to take and is refused.
  const absl::Status full = s.Add("e", "dave", U(1), kProgram);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("Too many clients hold benchmarks"));
  // An owner that already holds a cache replaces its own stalest.
  ASSERT_TRUE(s.Add("f", "alice", U(1), kProgram).ok());
  EXPECT_FALSE(Has(s, "a", U(1)));
  EXPECT_TRUE(Has(s, "c", U(1)) && Has(s, "d", U(1)) && Has(s, "f", U(1)));
  // A client at the limit cannot hold a cap without adding anything.
  EXPECT_EQ(s.set_max_size_in_bytes("g", "erin", kEntry), 10 * kEntry);
  EXPECT_EQ(s.max_size_in_bytes("g"), 10 * kEntry);
}

// The attack: one owner churning through 4,100 client ids, adding a tiny benchmark
// under each, evicts only its own caches; another owner's benchmark stays.
TEST(BenchmarkStore, AnOwnerChurningClientIdsEvictsOnlyItself) {
  BenchmarkStore s(Limits{}, 10 * kEntry, 1 << 20, /*max_clients=*/4096);
  ASSERT_TRUE(s.Add("victim", "conn:victim", U(1), kProgram).ok());
  for (int i = 0; i < 4100; ++i) {
    ASSERT_TRUE(s.Add("churn" + std::to_string(i), "conn:attacker", U(1), kProgram).ok()) << i;
  }
  EXPECT_TRUE(Has(s, "victim", U(1)));
  EXPECT_FALSE(Has(s, "churn0", U(1)));   // the attacker's stalest went
  EXPECT_TRUE(Has(s, "churn4099", U(1)));
  // Total bytes, likewise: the attacker's oldest go first.
  BenchmarkStore small(Limits{}, 10 * kEntry, 10 * kEntry);
  ASSERT_TRUE(small.Add("victim", "conn:victim", U(1), kProgram).ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(small.Add("churn" + std::to_string(i), "conn:attacker", U(1), kProgram).ok());
  }
  EXPECT_TRUE(Has(small, "victim", U(1)));
  EXPECT_EQ(small.total_size_in_bytes(), 10 * kEntry);
}

// A client whose connection changed (a reconnect) keeps its cache; it is accounted to the new
// connection from its next add.
TEST(BenchmarkStore, ACacheMovesToTheOwnerThatAddsToIt) {
  BenchmarkStore s(Limits{}, 10 * kEntry, 3 * kEntry);
  ASSERT_TRUE(s.Add("a", "conn:1", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("a", "conn:1", U(2), kProgram).ok());
  ASSERT_TRUE(s.Add("b", "conn:3", U(1), kProgram).ok());
  ASSERT_TRUE(s.Add("a", "conn:2", U(3), kProgram).ok());  // a reconnected: 3 entries on conn:2
  EXPECT_FALSE(Has(s, "a", U(1)));  // conn:2 holds the most now, and its oldest went
  EXPECT_TRUE(Has(s, "a", U(2)) && Has(s, "a", U(3)) && Has(s, "b", U(1)));
}

}  // namespace
}  // namespace looptool::service
