// Tuning many benchmarks across real servers (child processes): every benchmark reported once,
// a server killed mid-run costing only its benchmark in flight, the schedule store used by later
// runs, and the give-up rules.
#include "client/cpp/fleet.h"

#include <signal.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool::client {
namespace {

using testing::ServerProcess;

std::string Address(const ServerProcess& s) { return "127.0.0.1:" + std::to_string(s.port()); }

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::remove(path.c_str());
  return path;
}

// The 11 benchmarks of reduce-v0 and transpose-v0.
std::vector<std::string> Benchmarks() {
  std::vector<std::string> out;
  for (const char* n : {"rowsum_1024_1024", "colsum_1024_1024", "rowmax_512_2048",
                        "batchsum_64_64_256", "gemv_1024_1024", "gevm_1024_1024"}) {
    out.push_back(std::string("benchmark://reduce-v0/") + n);
  }
  for (const char* n : {"transpose_256_256", "transpose_512_1024", "transpose_1024_512",
                        "hwc_to_chw_56_56_64", "chw_to_hwc_64_56_56"}) {
    out.push_back(std::string("benchmark://transpose-v0/") + n);
  }
  return out;
}

FleetOptions Quick() {
  FleetOptions options;
  options.tune.search.time_limit_seconds = 0.4;
  options.connection.connect_timeout = absl::Seconds(2);
  options.connection.call_timeout = absl::Seconds(5);
  options.retry_interval = absl::Milliseconds(200);
  return options;
}

TEST(FleetTest, AServerKilledMidRunCostsOnlyItsBenchmarkInFlight) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(
        std::vector<std::string>{"--timing_budget_ms=1"}));
    ASSERT_TRUE(servers.back()->ok());
    addresses.push_back(Address(*servers.back()));
  }
  const std::string victim = addresses[1];
  const std::string store_path = TempPath("fleet.db");
  auto store = ScheduleStore::Open(store_path);
  ASSERT_TRUE(store.ok());

  FleetOptions options = Quick();
  options.tune.store = store->get();
  absl::Mutex mu;
  std::map<std::string, int> reported;  // benchmark -> times reported
  std::vector<std::string> after_kill;  // servers of results reported after the kill
  bool killed = false;
  options.on_result = [&](const TuneResult& r) {
    absl::MutexLock lock(&mu);
    ++reported[r.benchmark];
    if (killed) after_kill.push_back(r.server);
    // Kill the victim once two results are in: it is then tuning its next benchmark.
    if (!killed && reported.size() == 2) {
      kill(servers[1]->pid(), SIGKILL);
      killed = true;
    }
  };
  const std::vector<std::string> benchmarks = Benchmarks();
  const std::vector<TuneResult> results = TuneAcross(addresses, benchmarks, options);

  ASSERT_TRUE(killed);
  ASSERT_EQ(results.size(), benchmarks.size());
  int redone = 0;
  std::map<std::string, int> per_server;
  for (size_t i = 0; i < results.size(); ++i) {
    const TuneResult& r = results[i];
    EXPECT_EQ(r.benchmark, benchmarks[i]);
    EXPECT_EQ(reported[r.benchmark], 1) << r.benchmark;  // exactly once
    ASSERT_TRUE(r.status.ok()) << r.benchmark << ": " << r.status;
    EXPECT_GT(r.search.gflops, 0);
    EXPECT_GE(r.attempts, 1);
    EXPECT_LE(r.attempts, 2) << r.benchmark << ": " << r.status;
    redone += r.attempts - 1;
    ++per_server[r.server];
    EXPECT_NE(r.host_cpu, "");
    EXPECT_NE(r.host_cpu, "unknown CPU");  // LoopTool servers say which CPU they time on
  }
  EXPECT_EQ(per_server.size() + (per_server.count(victim) == 0), 3u);
  // After the kill nothing more came from the victim but, at most, the one result it may have
  // finished just before dying.
  int from_victim = 0;
  for (const std::string& s : after_kill) from_victim += s == victim;
  EXPECT_LE(from_victim, 1);
  EXPECT_LE(redone, 1);  // only the benchmark in flight on the victim

  // Every benchmark is in the store (the fastest of its attempts: the victim's attempt may have
  // stored a faster schedule before it died than the one its redo reported), and a second run
  // starts from what is stored.
  auto listed = (*store)->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), benchmarks.size());
  std::map<std::string, StoredSchedule> first;
  for (const StoredSchedule& s : *listed) first[s.benchmark] = s;
  for (const TuneResult& r : results) {
    EXPECT_GE(first[r.benchmark].gflops, r.search.gflops) << r.benchmark;
    if (r.attempts == 1) {  // one attempt, one offer: the store holds exactly that result
      EXPECT_EQ(first[r.benchmark].gflops, r.search.gflops) << r.benchmark;
      EXPECT_EQ(first[r.benchmark].actions, r.search.actions) << r.benchmark;
    }
  }
  std::vector<std::string> alive = {addresses[0], addresses[2]};
  FleetOptions again = Quick();
  again.tune.store = store->get();
  const std::vector<TuneResult> second = TuneAcross(alive, benchmarks, again);
  for (size_t i = 0; i < second.size(); ++i) {
    ASSERT_TRUE(second[i].status.ok()) << second[i].status;
    const StoredSchedule& before = first[benchmarks[i]];
    auto stored = (*store)->Find(benchmarks[i], results[i].host_cpu, "loop_tool");
    ASSERT_TRUE(stored.ok() && stored->has_value());
    // The second run replayed what the first stored, so its actions begin with them...
    ASSERT_EQ(second[i].stored_prefix, static_cast<int>(before.actions.size())) << benchmarks[i];
    EXPECT_TRUE(std::equal(before.actions.begin(), before.actions.end(),
                           second[i].search.actions.begin()));
    // ...and the store holds its result where it timed the stored schedule (its start: the
    // replayed actions, or the start state when none were stored) and found the result no slower
    // (this run's comparison, not the first run's number), else the faster.
    const SearchResult& r = second[i].search;
    if (r.start_gflops > 0 && r.gflops >= r.start_gflops) {
      EXPECT_TRUE(second[i].stored) << benchmarks[i];
      EXPECT_EQ((*stored)->gflops, r.gflops) << benchmarks[i];
      EXPECT_EQ((*stored)->actions, r.actions) << benchmarks[i];
    } else {
      EXPECT_EQ((*stored)->gflops, std::max(before.gflops, r.gflops)) << benchmarks[i];
    }
  }
}

// A stored number no run on this server can reach (stored by an older code generator, or at
// another clock) does not lock the store: the next run replays the stored schedule, times it
// beside its result and stores the result at this run's number; stored actions that no longer
// replay give way to the next result.
TEST(FleetTest, AStaleStoredNumberGivesWayToThisRunsComparison) {
  ServerProcess server({"--timing_budget_ms=1"});
  ASSERT_TRUE(server.ok());
  auto store = ScheduleStore::Open(TempPath("stale.db"));
  ASSERT_TRUE(store.ok());
  FleetOptions options = Quick();
  options.tune.store = store->get();
  // A matmul: its untiled nest is several times slower than what a short search finds.
  const std::vector<std::string> mm = {"benchmark://mm64_256_16_range-v0/mm112_208_256"};
  const std::vector<TuneResult> first = TuneAcross({Address(server)}, mm, options);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].status.ok()) << first[0].status;
  ASSERT_TRUE(first[0].stored);
  auto kept = (*store)->Find(mm[0], first[0].host_cpu, "loop_tool");
  ASSERT_TRUE(kept.ok() && kept->has_value());
  // A schedule that replays (a cursor move: the untiled nest, which any search outruns) at a
  // number this host never measures.
  StoredSchedule stale = **kept;
  stale.actions = {"down"};
  stale.gflops = 1e6;
  ASSERT_TRUE(*(*store)->Offer(stale));

  const std::vector<TuneResult> second = TuneAcross({Address(server)}, mm, options);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_TRUE(second[0].status.ok()) << second[0].status;
  const SearchResult& r = second[0].search;
  ASSERT_EQ(second[0].stored_prefix, 1);
  ASSERT_GT(r.start_gflops, 0);  // the stored schedule was timed beside the result
  // The result is the faster of that comparison (its number is this run's reading, however near
  // the replayed schedule's), so the store takes it.
  ASSERT_GE(r.gflops, r.start_gflops) << r.loop_tree;
  EXPECT_TRUE(second[0].stored);
  auto now = (*store)->Find(mm[0], first[0].host_cpu, "loop_tool");
  ASSERT_TRUE(now.ok() && now->has_value());
  EXPECT_EQ((*now)->gflops, r.gflops);
  EXPECT_LT((*now)->gflops, 1e6);
  EXPECT_EQ((*now)->actions, r.actions);

  // Stored actions that no longer replay (a space that changed since) give way to any result.
  StoredSchedule unusable = **now;
  unusable.actions = {"no_such_action"};
  unusable.gflops = 2e6;
  ASSERT_TRUE(*(*store)->Offer(unusable));
  const std::vector<TuneResult> third = TuneAcross({Address(server)}, mm, options);
  ASSERT_EQ(third.size(), 1u);
  ASSERT_TRUE(third[0].status.ok()) << third[0].status;
  EXPECT_EQ(third[0].stored_prefix, 0);
  EXPECT_TRUE(third[0].stored);
  auto replaced = (*store)->Find(mm[0], first[0].host_cpu, "loop_tool");
  ASSERT_TRUE(replaced.ok() && replaced->has_value());
  EXPECT_EQ((*replaced)->gflops, third[0].search.gflops);
  EXPECT_EQ((*replaced)->actions, third[0].search.actions);
}

// `--policy=loop_set` plays the built-in loop_set policy of each server's ISA: on a server
// generating AVX2 code, the greedy episode of the one learned from AVX2 records, not the AVX-512
// one's (the two tile this matmul differently).
TEST(FleetTest, TheLoopSetPolicyByIsaIsTheOneOfTheServersIsa) {
  ServerProcess server({"--timing_budget_ms=1", "--isa=avx2"});
  ASSERT_TRUE(server.ok());
  const auto greedy = [&server](const Policy& policy, bool by_isa) {
    FleetOptions options = Quick();
    options.tune.action_space = "loop_nest";
    options.tune.search.search = *ParseSearch("policy");
    options.tune.search.policy = &policy;
    options.tune.search.policy_candidates = 1;  // the greedy episode, its final state timed
    options.tune.search.time_limit_seconds = 20;  // one state timed: room on a loaded host
    options.tune.search.policy_seconds = 20;
    options.tune.loop_set_by_isa = by_isa;
    const std::vector<TuneResult> r =
        TuneAcross({Address(server)}, {"benchmark://mm64_256_16_range-v0/mm64_160_96"}, options);
    if (r.size() != 1 || !r[0].status.ok()) {
      ADD_FAILURE() << r.size() << " results; " << (r.empty() ? absl::OkStatus() : r[0].status);
      return std::vector<std::string>();
    }
    EXPECT_EQ(r[0].search.states_evaluated, 1);
    return r[0].search.actions;
  };
  const std::vector<std::string> avx2 = greedy(Policy::LoopSetFor("avx2"), false);
  const std::vector<std::string> avx512 = greedy(Policy::LoopSet(), false);
  ASSERT_FALSE(avx2.empty());
  ASSERT_NE(avx2, avx512);
  // Given the AVX-512 policy, by ISA it plays the AVX2 one.
  EXPECT_EQ(greedy(Policy::LoopSet(), true), avx2);
}

// A search whose re-timing was asked for and did not happen (its server went away) is not
// offered to the store: its GFLOPS are the luckiest of many measurements.
TEST(FleetTest, OnlyRetimedResultsAreStorable) {
  SearchOptions retiming;
  retiming.retime_top = 3;
  SearchResult searched;
  searched.states_evaluated = 40;
  EXPECT_FALSE(Storable(retiming, searched));
  searched.retimed = true;
  EXPECT_TRUE(Storable(retiming, searched));
  SearchResult one_state;  // a policy episode: one measurement, nothing to re-time
  one_state.states_evaluated = 1;
  EXPECT_TRUE(Storable(retiming, one_state));
  SearchOptions own;
  own.retime_top = 0;  // the search's own measurements were asked for
  searched.retimed = false;
  EXPECT_TRUE(Storable(own, searched));
}

TEST(FleetTest, ABenchmarkThatFailsOnALiveServerIsReportedOnceNotRetried) {
  ServerProcess a({"--timing_budget_ms=1"}), b({"--timing_budget_ms=1"});
  ASSERT_TRUE(a.ok() && b.ok());
  FleetOptions options = Quick();
  int calls = 0;
  options.on_result = [&](const TuneResult&) { ++calls; };
  const std::vector<TuneResult> results = TuneAcross(
      {Address(a), Address(b)},
      std::vector<std::string>{"benchmark://reduce-v0/no_such_benchmark",
                               "benchmark://reduce-v0/gemv_1024_1024"},
      options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kNotFound) << results[0].status;
  EXPECT_EQ(results[0].attempts, 1);
  EXPECT_TRUE(results[1].status.ok()) << results[1].status;
}

TEST(FleetTest, NoServerEverAnsweringFailsEveryBenchmarkOnceSoon) {
  ServerProcess gone({"--timing_budget_ms=1"});
  ASSERT_TRUE(gone.ok());
  const std::string address = Address(gone);
  gone.Terminate();  // nothing listens there now
  FleetOptions options = Quick();
  // Never reached (a mistyped address): the short rule applies, not the 60 s one.
  options.give_up_after = absl::Seconds(60);
  options.give_up_unreached = absl::Seconds(1);
  int calls = 0;
  options.on_result = [&](const TuneResult&) { ++calls; };
  const absl::Time start = absl::Now();
  const std::vector<TuneResult> results =
      TuneAcross({address}, std::vector<std::string>{"benchmark://reduce-v0/gemv_1024_1024",
                                                     "benchmark://reduce-v0/gevm_1024_1024"},
                 options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_EQ(calls, 2);
  for (const TuneResult& r : results) {
    EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
    EXPECT_THAT(std::string(r.status.message()), ::testing::HasSubstr("no server answered"));
  }
}

}  // namespace
}  // namespace looptool::client
