// The hardening issue's findings against a real looptool-server: per-RPC request limits checked
// before parsing, isolation between clients (built-in benchmarks immutable, per-client benchmark
// caches, unguessable session ids), strict names and URIs, the shared token and TLS for
// non-loopback binds, steps that fail changing nothing, a start or fork sent again making no
// second session, a SIGTERM drain bounded in time, no stale port.txt/pid.txt after exit, and the
// transport's bounds set by flags (as a raw HTTP/2 client reads them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;
namespace cg = compiler_gym;

constexpr char kMm[] = "benchmark://mm64_256_16_range-v0/mm64_64_64";

// A context that names its client (as our clients do) and, optionally, carries a token and a
// request id.
std::unique_ptr<grpc::ClientContext> Ctx(const std::string& client = "",
                                         const std::string& token = "",
                                         const std::string& request = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!client.empty()) ctx->AddMetadata("looptool-client-id", client);
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  if (!request.empty()) ctx->AddMetadata("looptool-request-id", request);
  return ctx;
}

grpc::Status Add(cg::CompilerGymService::Stub& stub, const std::string& client,
                 const std::string& uri, const std::string& program) {
  cg::AddBenchmarkRequest r;
  cg::Benchmark* b = r.add_benchmark();
  b->set_uri(uri);
  if (!program.empty()) b->mutable_program()->set_contents(program);
  cg::AddBenchmarkReply reply;
  return stub.AddBenchmark(Ctx(client).get(), r, &reply);
}

// Starts a session on `uri` for `client` and returns its loop_tree text ("" on failure, with
// the status in `status`).
std::string StartTree(cg::CompilerGymService::Stub& stub, const std::string& client,
                      const std::string& uri, grpc::Status* status = nullptr) {
  const int loop_tree = testing::ObservationIndex(stub, "loop_tree");
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(uri);
  r.add_observation_space(loop_tree);
  cg::StartSessionReply reply;
  grpc::Status s = stub.StartSession(Ctx(client).get(), r, &reply);
  if (status) *status = s;
  if (!s.ok() || reply.observation_size() != 1) return "";
  return reply.observation(0).string_value();
}

std::string Param(cg::CompilerGymService::Stub& stub, const std::string& client, int64_t session,
                  const std::string& key, const std::string& value) {
  cg::SendSessionParameterRequest r;
  r.set_session_id(session);
  cg::SessionParameter* p = r.add_parameter();
  p->set_key(key);
  p->set_value(value);
  cg::SendSessionParameterReply reply;
  grpc::Status s = stub.SendSessionParameter(Ctx(client).get(), r, &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return reply.reply_size() ? reply.reply(0) : "";
}

int64_t Start(cg::CompilerGymService::Stub& stub, const std::string& client = "") {
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(kMm);
  cg::StartSessionReply reply;
  grpc::Status s = stub.StartSession(Ctx(client).get(), r, &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return reply.session_id();
}

// Resident memory of a process, in bytes.
int64_t Rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

class HardeningTest : public ::testing::Test {
 protected:
  // The test server: the production server with the test-only parameters (fault injection,
  // test.trim_heap).
  static void SetUpTestSuite() {
    server_ = new ServerProcess({}, ServerProcess::kTestServerBinary);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(), 0);
    delete server_;
  }
  static ServerProcess* server_;
};
ServerProcess* HardeningTest::server_ = nullptr;

TEST_F(HardeningTest, BuiltInBenchmarksCannotBeReplaced) {
  ASSERT_TRUE(server_->ok());
  auto& stub = server_->stub();
  const std::string original = StartTree(stub, "alice", kMm);
  ASSERT_FALSE(original.empty());
  grpc::Status s = Add(stub, "mallory", kMm, "O[r] += I[r,c]; r=8 c=8");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(s.error_message(), std::string("Benchmark ") + kMm +
                                   " is built in and cannot be replaced; add your program "
                                   "under a URI of your own");
  // Sending a built-in benchmark's own program back is harmless (CompilerGym may).
  EXPECT_TRUE(Add(stub, "bob", kMm, "C[m,n] += A[m,k] * B[k,n]\nm=64 n=64 k=64\n").ok());
  EXPECT_EQ(StartTree(stub, "alice", kMm), original);
  EXPECT_EQ(StartTree(stub, "mallory", kMm), original);
}

TEST_F(HardeningTest, AddedBenchmarksArePerClient) {
  auto& stub = server_->stub();
  const std::string uri = "benchmark://user-v0/mine";
  ASSERT_TRUE(Add(stub, "alice", uri, "O[r] += I[r,c]; r=64 c=48").ok());
  ASSERT_TRUE(Add(stub, "bob", uri, "s[m] += A[m,n]; m=16 n=8").ok());
  EXPECT_THAT(StartTree(stub, "alice", uri), HasSubstr("for r in 64"));
  EXPECT_THAT(StartTree(stub, "bob", uri), HasSubstr("for m in 16"));
  grpc::Status s;
  EXPECT_EQ(StartTree(stub, "carol", uri, &s), "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Benchmark not found: " + uri);

  // Bob empties his own cache: Alice keeps hers.
  const int64_t bobs = Start(stub, "bob");
  EXPECT_EQ(Param(stub, "bob", bobs, "service.benchmark_cache.set_max_size_in_bytes", "0"), "0");
  EXPECT_EQ(Param(stub, "bob", bobs, "service.benchmark_cache.get_size_in_bytes", ""), "0");
  EXPECT_EQ(StartTree(stub, "bob", uri, &s), "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(StartTree(stub, "alice", uri), HasSubstr("for r in 64"));
  EXPECT_EQ(Param(stub, "alice", bobs, "service.benchmark_cache.get_max_size_in_bytes", ""),
            "67108864");
}

TEST_F(HardeningTest, AnyUriSchemeWorksWithItsProgram) {
  auto& stub = server_->stub();
  for (const std::string uri : {"file:///home/me/kernel.lt", "generator://rowsum/64x48",
                                "benchmark://user-v0/rowsum"}) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(uri);
    r.mutable_benchmark()->mutable_program()->set_contents("O[r] += I[r,c]; r=64 c=48");
    cg::StartSessionReply reply;
    grpc::Status s = stub.StartSession(Ctx("dora").get(), r, &reply);
    EXPECT_TRUE(s.ok()) << uri << ": " << s.error_message();
  }
  // CompilerGym's fallback for an unknown URI: AddBenchmark without a program.
  grpc::Status s = Add(stub, "dora", "benchmark://nowhere-v0/x", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Benchmark not found: benchmark://nowhere-v0/x");
}

TEST_F(HardeningTest, NamesAndUrisWithSpacesDoNotResolve) {
  auto& stub = server_->stub();
  for (const std::string uri : {"benchmark://mm64_256_16_range-v0/mm 64_64_64",
                                "benchmark://mm64_256_16_range-v0/mm64_64_64 ",
                                "benchmark://mm64_256_16_range-v0/mm+64_64_64"}) {
    grpc::Status s;
    EXPECT_EQ(StartTree(stub, "erin", uri, &s), "") << uri;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << uri;
  }
  EXPECT_EQ(Add(stub, "erin", "benchmark://user-v0/a b", "O[r] += I[r,c]; r=4 c=4").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  const int64_t id = Start(stub);
  for (const std::string name : {"split_4 ", " split_4", "split_+4", "down "}) {
    cg::StepRequest r;
    r.set_session_id(id);
    r.add_action()->set_string_value(name);
    cg::StepReply reply;
    grpc::Status s = stub.Step(Ctx().get(), r, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "'" << name << "'";
    EXPECT_THAT(s.error_message(), HasSubstr("Unknown action '" + name + "'"));
  }
}

TEST_F(HardeningTest, OversizedRequestsAreRefusedBeforeParsing) {
  auto& stub = server_->stub();
  const int64_t id = Start(stub);
  // Over Step's own limit (256 KiB) but under the transport's (2 MiB): refused by the front end
  // with the RPC's limit named, nothing parsed.
  cg::StepRequest big;
  big.set_session_id(id);
  for (int i = 0; i < 150000; ++i) big.add_action()->set_int64_value(1);
  cg::StepReply reply;
  grpc::Status s = stub.Step(Ctx().get(), big, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("StepRequest of"));
  EXPECT_THAT(s.error_message(), HasSubstr("(262144 bytes)"));

  // The 16.7M actions (~50 MB, which the old server parsed into 0.5-1.3 GB before
  // refusing): refused by the transport, never parsed. gRPC buffers a message before it checks
  // its size, so memory rises by about one message per concurrent call; it is reused, so more
  // of them do not add up (the server trims its heap), and the server goes on serving.
  cg::StepRequest huge;
  huge.set_session_id(id);
  for (int i = 0; i < (1 << 24); ++i) huge.add_action()->set_int64_value(1);
  auto send_huge = [&] {
    cg::StepReply r;
    grpc::Status status = stub.Step(Ctx().get(), huge, &r);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  };
  // The server trims its heap every second; the test server does it at once when asked.
  const auto trimmed_rss = [&] {
    cg::SendSessionParameterRequest trim;
    trim.set_session_id(id);
    trim.add_parameter()->set_key("test.trim_heap");
    cg::SendSessionParameterReply answer;
    EXPECT_TRUE(stub.SendSessionParameter(Ctx().get(), trim, &answer).ok());
    return Rss(server_->pid());
  };
  const int64_t before = trimmed_rss();
  for (int round = 0; round < 4; ++round) send_huge();
  const int64_t first = trimmed_rss();
  for (int round = 0; round < 8; ++round) send_huge();
  const int64_t second = trimmed_rss();
  std::printf("RSS %lld -> %lld -> %lld MB\n", static_cast<long long>(before >> 20),
              static_cast<long long>(first >> 20), static_cast<long long>(second >> 20));
#ifndef __SANITIZE_ADDRESS__  // ASan's allocator keeps freed memory in quarantine
  EXPECT_LT(first - before, int64_t{64} << 20);
  EXPECT_LT(second - before, int64_t{64} << 20);
#endif
  cg::StepRequest ok;
  ok.set_session_id(id);
  ok.add_action()->set_int64_value(1);
  EXPECT_TRUE(stub.Step(Ctx().get(), ok, &reply).ok());
}

// A failed step changes nothing: the actions before the failure, a kernel too costly to time,
// a crash while timing, none of them is left applied.
TEST_F(HardeningTest, AFailedStepChangesNothing) {
  auto& stub = server_->stub();
  const int loop_tree = testing::ObservationIndex(stub, "loop_tree");
  const int flops = testing::ObservationIndex(stub, "flops");
  const auto tree_of = [&](int64_t id) {
    cg::StepRequest r;
    r.set_session_id(id);
    r.add_observation_space(loop_tree);
    cg::StepReply reply;
    EXPECT_TRUE(stub.Step(Ctx().get(), r, &reply).ok());
    return reply.observation_size() == 1 ? reply.observation(0).string_value() : "";
  };
  const auto step = [&](int64_t id, const std::vector<std::string>& actions,
                        std::vector<int> observations) {
    cg::StepRequest r;
    r.set_session_id(id);
    for (const std::string& a : actions) r.add_action()->set_string_value(a);
    for (int o : observations) r.add_observation_space(o);
    cg::StepReply reply;
    return stub.Step(Ctx().get(), r, &reply);
  };
  // The case: split_2 on a kernel too costly to time, observing loop_tree and flops.
  cg::StartSessionRequest start;
  start.mutable_benchmark()->set_uri("benchmark://mm64_256_16_range-v0/mm2048_2048_2048");
  cg::StartSessionReply started;
  ASSERT_TRUE(stub.StartSession(Ctx().get(), start, &started).ok());
  const int64_t big = started.session_id();
  const std::string big_tree = tree_of(big);
  grpc::Status s = step(big, {"split_2"}, {loop_tree, flops});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(tree_of(big), big_tree);
  // A kernel that crashes while timing the state two actions reach.
  const int64_t small = Start(stub);
  const std::string small_tree = tree_of(small);
  EXPECT_EQ(Param(stub, "", small, "test.inject_fault", "crash"), "crash");
  s = step(small, {"split_4", "down"}, {flops});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_EQ(tree_of(small), small_tree);
  // An unknown action after a good one.
  s = step(small, {"split_4", "nope"}, {});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(tree_of(small), small_tree);
  // And a step that succeeds does apply.
  ASSERT_TRUE(step(small, {"split_4"}, {flops}).ok());
  EXPECT_NE(tree_of(small), small_tree);
}

// A StartSession or ForkSession sent again with its request id (gRPC's retry after the reply was
// lost) gets the session the first call made; another request id, another client or no id at
// all makes a new one, and so does a repeat after that session ended.
TEST_F(HardeningTest, AStartOrForkSentAgainGetsTheSessionItMade) {
  auto& stub = server_->stub();
  const auto start = [&](const std::string& client, const std::string& request) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(kMm);
    cg::StartSessionReply reply;
    grpc::Status s = stub.StartSession(Ctx(client, "", request).get(), r, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.session_id();
  };
  const auto fork = [&](int64_t parent, const std::string& client, const std::string& request) {
    cg::ForkSessionRequest r;
    r.set_session_id(parent);
    cg::ForkSessionReply reply;
    grpc::Status s = stub.ForkSession(Ctx(client, "", request).get(), r, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.session_id();
  };
  const auto end = [&](int64_t id) {
    cg::EndSessionRequest r;
    r.set_session_id(id);
    cg::EndSessionReply reply;
    grpc::Status s = stub.EndSession(Ctx().get(), r, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.remaining_sessions();
  };
  const int64_t a = start("retry-a", "1");
  EXPECT_EQ(start("retry-a", "1"), a);
  const int64_t other_request = start("retry-a", "2");
  const int64_t other_client = start("retry-b", "1");
  const int64_t no_id = start("retry-a", "");
  const int64_t no_id_again = start("retry-a", "");
  EXPECT_NE(other_request, a);
  EXPECT_NE(other_client, a);
  EXPECT_NE(no_id, no_id_again);
  const int64_t f = fork(a, "retry-a", "3");
  EXPECT_NE(f, a);
  EXPECT_EQ(fork(a, "retry-a", "3"), f);
  // Every call above but the two repeats made one session.
  const int64_t remaining = end(f);
  for (int64_t id : {other_request, other_client, no_id, no_id_again}) end(id);
  // The fork ended: the same request makes a new one.
  const int64_t f2 = fork(a, "retry-a", "3");
  EXPECT_NE(f2, f);
  EXPECT_EQ(end(f2), remaining - 4);
  EXPECT_EQ(end(a), remaining - 5);
}

// Attempts of one request that arrive at once (a retry while the first attempt still runs on
// the server) make one session between them, and each gets it: starts that time a kernel (so
// that the attempts overlap), and forks.
TEST_F(HardeningTest, ConcurrentAttemptsOfOneRequestMakeOneSession) {
  auto& stub = server_->stub();
  const int flops = testing::ObservationIndex(stub, "flops");
  constexpr int kRequests = 10;
  constexpr int kAttempts = 4;
  // Request r < kRequests is a start, r >= kRequests a fork of the first start.
  std::vector<std::vector<int64_t>> made(2 * kRequests, std::vector<int64_t>(kAttempts, 0));
  const auto attempts = [&](int first, int last, const std::function<int64_t(int)>& call) {
    std::vector<std::thread> threads;
    for (int a = 0; a < kAttempts; ++a) {
      threads.emplace_back([&, a] {
        for (int r = first; r < last; ++r) made[r][a] = call(r);
      });
    }
    for (std::thread& t : threads) t.join();
  };
  attempts(0, kRequests, [&](int r) {
    cg::StartSessionRequest request;
    request.mutable_benchmark()->set_uri(kMm);
    request.add_observation_space(flops);
    cg::StartSessionReply reply;
    grpc::Status s =
        stub.StartSession(Ctx("dup", "", absl::StrCat("start-", r)).get(), request, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(reply.observation_size(), 1);
    return reply.session_id();
  });
  attempts(kRequests, 2 * kRequests, [&](int r) {
    cg::ForkSessionRequest request;
    request.set_session_id(made[0][0]);
    cg::ForkSessionReply reply;
    grpc::Status s =
        stub.ForkSession(Ctx("dup", "", absl::StrCat("fork-", r)).get(), request, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.session_id();
  });
  std::set<int64_t> sessions;
  for (int r = 0; r < 2 * kRequests; ++r) {
    for (int a = 1; a < kAttempts; ++a) EXPECT_EQ(made[r][a], made[r][0]) << "request " << r;
    sessions.insert(made[r].begin(), made[r].end());
  }
  EXPECT_EQ(sessions.size(), 2 * kRequests);
  for (int64_t id : sessions) {
    cg::EndSessionRequest request;
    request.set_session_id(id);
    cg::EndSessionReply reply;
    EXPECT_TRUE(stub.EndSession(Ctx().get(), request, &reply).ok()) << id;
  }
}

TEST_F(HardeningTest, SessionIdsAreNotSequential) {
  auto& stub = server_->stub();
  const int64_t a = Start(stub), b = Start(stub);
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  // Another client cannot reach a session by guessing its neighbour.
  for (int64_t guess : {a - 1, a + 1, b - 1, b + 1}) {
    if (guess == a || guess == b) continue;
    cg::StepRequest r;
    r.set_session_id(guess);
    cg::StepReply reply;
    EXPECT_EQ(stub.Step(Ctx().get(), r, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(HardeningTest, AKernelTooCostlyToTimeIsRefusedAtOnceAndOthersGoOn) {
  auto& stub = server_->stub();
  const int flops = testing::ObservationIndex(stub, "flops");
  auto start_on = [&](const std::string& uri) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(uri);
    cg::StartSessionReply reply;
    EXPECT_TRUE(stub.StartSession(Ctx().get(), r, &reply).ok());
    return reply.session_id();
  };
  const int64_t big = start_on("benchmark://mm64_256_16_range-v0/mm2048_2048_2048");
  const int64_t small = start_on("benchmark://mm64_256_16_range-v0/mm64_80_96");
  std::thread other([&] {
    cg::StepRequest r;
    r.set_session_id(small);
    r.add_observation_space(flops);
    cg::StepReply reply;
    grpc::Status s = stub.Step(Ctx().get(), r, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_GT(reply.observation(0).double_value(), 0);
  });
  cg::StepRequest r;
  r.set_session_id(big);
  r.add_observation_space(flops);
  cg::StepReply reply;
  grpc::Status s = stub.Step(Ctx().get(), r, &reply);
  // Refused by its estimate, before any worker ran it (run, it would have hit the 30 s
  // deadline: DEADLINE_EXCEEDED).
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("Kernel too costly to evaluate"));
  other.join();
  // The session itself goes on: cheap observations still answer.
  r.clear_observation_space();
  r.add_observation_space(testing::ObservationIndex(stub, "flop_count"));
  EXPECT_TRUE(stub.Step(Ctx().get(), r, &reply).ok());
  EXPECT_EQ(reply.observation(0).int64_value(), int64_t{2} * 2048 * 2048 * 2048);
}

TEST(Exit, PortAndPidFilesAreRemoved) {
  ServerProcess server;
  ASSERT_TRUE(server.ok());
  const std::string dir = server.working_dir();
  EXPECT_TRUE(std::filesystem::exists(dir + "/port.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/pid.txt"));
  EXPECT_EQ(server.Terminate(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/port.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/pid.txt"));
}

grpc::Status Fork(cg::CompilerGymService::Stub& stub, int64_t parent, int64_t* id = nullptr,
                  std::chrono::seconds deadline = std::chrono::seconds(60)) {
  cg::ForkSessionRequest r;
  r.set_session_id(parent);
  cg::ForkSessionReply reply;
  auto ctx = Ctx();
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::Status s = stub.ForkSession(ctx.get(), r, &reply);
  if (id != nullptr) *id = reply.session_id();
  return s;
}

// The first attack: one client forks until the server is full. Forks count against the
// client that forks; another client still gets sessions, each in place of the filler's least
// recently used, until both hold as many; and no client may hold more than its cap.
TEST(FairShares, AClientThatFillsTheServerCannotLockOthersOut) {
  ServerProcess server({"--max_sessions=16", "--max_sessions_per_client=12"});
  ASSERT_TRUE(server.ok());
  auto mallory = server.NewStub(), alice = server.NewStub();
  const int64_t root = Start(*mallory);
  int forks = 0;
  grpc::Status s;
  while ((s = Fork(*mallory, root)).ok() && forks < 100) ++forks;
  EXPECT_EQ(forks, 11);  // with its start: 12, its cap
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("Too many sessions for this client: it holds 12"));
  // Another client fills the rest (4), then takes from mallory until both hold 8.
  std::vector<int64_t> mine;
  for (int i = 0; i < 8; ++i) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(kMm);
    cg::StartSessionReply reply;
    s = alice->StartSession(Ctx().get(), r, &reply);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
    mine.push_back(reply.session_id());
  }
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(kMm);
  cg::StartSessionReply reply;
  s = alice->StartSession(Ctx().get(), r, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("no client holds more than this one"));
  // Mallory cannot take them back: a fork of its own is refused too.
  EXPECT_EQ(Fork(*mallory, root).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Alice's sessions are all alive; her fork of one is a session of hers.
  for (int64_t id : mine) {
    cg::StepRequest step;
    step.set_session_id(id);
    cg::StepReply stepped;
    EXPECT_TRUE(alice->Step(Ctx().get(), step, &stepped).ok());
  }
  EXPECT_EQ(Fork(*alice, mine[0]).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(server.Terminate(), 0);
}

// The fourth attack: one client's calls pile up behind its own busy session (a kernel
// that hangs, then 40 more steps on that session, each waiting for it on a thread). Another
// client's calls that need a thread (forks) still get one at once: one client runs at most
// --max_running_calls_per_client of the pool's 32 threads. (With 32, as before, every thread
// waits on the busy session and the fork waits for the hang's 60 s deadline.)
TEST(FairShares, OneClientsBlockedCallsLeaveThreadsForOthers) {
  ServerProcess server({"--eval_deadline=60", "--drain_seconds=0"},
                       ServerProcess::kTestServerBinary);
  ASSERT_TRUE(server.ok());
  auto mallory = server.NewStub(), alice = server.NewStub(), probe = server.NewStub();
  const int64_t busy = Start(*mallory);
  EXPECT_EQ(Param(*mallory, "", busy, "test.inject_fault", "hang"), "hang");
  const int flops = testing::ObservationIndex(*mallory, "flops");
  const int64_t probe_session = Start(*probe);
  std::vector<std::thread> calls;
  std::atomic<int> finished{0};
  const auto step = [&](bool timed) {
    cg::StepRequest r;
    r.set_session_id(busy);
    if (timed) r.add_observation_space(flops);
    cg::StepReply reply;
    auto ctx = Ctx();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    mallory->Step(ctx.get(), r, &reply);
    ++finished;
  };
  calls.emplace_back(step, true);
  // The hang holds the session (and a worker) now.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Param(*probe, "", probe_session, "test.faults_fired", "") != "1" &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  for (int i = 0; i < 40; ++i) calls.emplace_back(step, false);
  const int64_t own = Start(*alice);
  for (int i = 0; i < 5; ++i) {
    int64_t fork = 0;
    const grpc::Status s = Fork(*alice, own, &fork, std::chrono::seconds(20));
    EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
  }
  EXPECT_EQ(finished.load(), 0);  // mallory's calls were all still waiting meanwhile
  EXPECT_EQ(server.Terminate(), 0);  // cancels them (--drain_seconds=0)
  for (std::thread& t : calls) t.join();
}

// SIGTERM while one session's kernel hangs and three more wait for the one worker: after
// --drain_seconds the calls are cancelled, the hung kernel is abandoned to its (killed) worker
// and the queued ones are dropped, so the server exits 0 long before the hang's 60 s deadline
// (and inside Docker's 10 s stop timeout) instead of running every queued kernel first.
TEST(Exit, SigtermDrainsInBoundedTimeWhileKernelsHang) {
  ServerProcess server({"--drain_seconds=1", "--eval_deadline=60"},
                       ServerProcess::kTestServerBinary);
  ASSERT_TRUE(server.ok());
  // Four clients (connections; faults are armed per client), one session each.
  constexpr int kSessions = 4;
  std::vector<std::unique_ptr<cg::CompilerGymService::Stub>> stubs;
  std::vector<int64_t> sessions;
  for (int i = 0; i < kSessions; ++i) {
    stubs.push_back(server.NewStub());
    sessions.push_back(Start(*stubs.back()));
    EXPECT_EQ(Param(server.stub(), "", sessions.back(), "test.inject_fault", "hang"), "hang");
  }
  const int flops = testing::ObservationIndex(server.stub(), "flops");
  std::vector<grpc::Status> statuses(kSessions);
  std::vector<std::thread> steps;
  for (int i = 0; i < kSessions; ++i) {
    steps.emplace_back([&, i] {
      cg::CompilerGymService::Stub* stub = stubs[i].get();
      cg::StepRequest r;
      r.set_session_id(sessions[i]);
      r.add_observation_space(flops);
      cg::StepReply reply;
      auto ctx = Ctx();
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      statuses[i] = stub->Step(ctx.get(), r, &reply);
    });
  }
  // Every step has reached the kernel timer: one hangs in the worker, three queue behind it.
  // (Asked through a session of its own: the stepping ones are locked by their steps.)
  const int64_t probe = Start(server.stub());
  const auto fired = [&] { return Param(server.stub(), "", probe, "test.faults_fired", ""); };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (fired() != std::to_string(kSessions) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_EQ(fired(), std::to_string(kSessions));  // (then the bound below is not tested)
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.Terminate(), 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::thread& t : steps) t.join();
  EXPECT_LT(seconds, 10) << "the drain did not cut the hung and queued kernels off";
  for (const grpc::Status& st : statuses) EXPECT_FALSE(st.ok());
}

// The server lifts its soft descriptor limit to the hard one (idle connections past the common
// soft limit of 1,024 would otherwise leave its listener dead for good): started with a soft
// limit of 256, it runs with the hard limit.
TEST(Transport, TheDescriptorLimitIsRaisedToTheHardLimit) {
  rlimit inherited;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &inherited), 0);
  rlimit lowered = inherited;
  lowered.rlim_cur = std::min<rlim_t>(256, inherited.rlim_max);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  ServerProcess server;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &inherited), 0);
  ASSERT_TRUE(server.ok());
  std::ifstream limits("/proc/" + std::to_string(server.pid()) + "/limits");
  std::string line, soft, hard;
  while (std::getline(limits, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(std::string("Max open files").size()));
    fields >> soft >> hard;
  }
  const std::string expected =
      inherited.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(inherited.rlim_max);
  EXPECT_EQ(hard, expected);
  EXPECT_EQ(soft, expected);
  EXPECT_EQ(server.Terminate(), 0);
}

// The value of SETTINGS_MAX_CONCURRENT_STREAMS in the first SETTINGS frame a server on
// 127.0.0.1:`port` sends a new HTTP/2 connection, as a raw client reads it; -1 when the frame
// does not come within 5 s or does not hold that setting.
int AdvertisedMaxConcurrentStreams(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int found = -1;
  // The client's preface and an empty SETTINGS frame.
  const std::string start = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                            std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  auto read_exactly = [fd](unsigned char* out, size_t n) {
    for (size_t got = 0; got < n;) {
      const ssize_t r = read(fd, out + got, n - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 &&
      send(fd, start.data(), start.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(start.size())) {
    for (int frames = 0; frames < 16; ++frames) {
      unsigned char header[9];
      if (!read_exactly(header, 9)) break;
      const size_t length = (size_t{header[0]} << 16) | (size_t{header[1]} << 8) | header[2];
      std::vector<unsigned char> payload(length);
      if (length > (1 << 16) || !read_exactly(payload.data(), length)) break;
      if (header[3] != 0x4 || (header[4] & 0x1) != 0) continue;  // not SETTINGS, or its ACK
      for (size_t i = 0; i + 6 <= length; i += 6) {
        if (((payload[i] << 8) | payload[i + 1]) != 0x3) continue;
        found = static_cast<int>((uint32_t{payload[i + 2]} << 24) |
                                 (uint32_t{payload[i + 3]} << 16) |
                                 (uint32_t{payload[i + 4]} << 8) | payload[i + 5]);
      }
      break;
    }
  }
  close(fd);
  return found;
}

// The transport's limits are flags: the streams per connection a server advertises follow
// --max_streams_per_connection (16 by default), with gRPC's listener and LoopTool's own, beside
// the other transport flags; a server given a limit of 0 (or a negative time) does not start.
TEST(Transport, TheStreamsPerConnectionAreAFlag) {
  {
    ServerProcess server;
    ASSERT_TRUE(server.ok());
    EXPECT_EQ(AdvertisedMaxConcurrentStreams(server.port()), 16);
  }
  for (const char* listener : {"--manage_connections=false", "--manage_connections=true"}) {
    ServerProcess server({"--max_streams_per_connection=7", "--max_transport_memory_mb=64",
                          "--max_connection_idle=30", "--keepalive_time=5",
                          "--keepalive_timeout=2", listener});
    ASSERT_TRUE(server.ok()) << listener;
    EXPECT_EQ(AdvertisedMaxConcurrentStreams(server.port()), 7) << listener;
  }
  for (const char* refused : {"--max_streams_per_connection=0", "--max_transport_memory_mb=0",
                              "--keepalive_timeout=-1", "--keepalive_time=0.0001"}) {
    ServerProcess server({refused});
    EXPECT_FALSE(server.ok()) << refused;
  }
}

std::string TempFile(const std::string& name, const std::string& text) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Auth, NonLoopbackBindNeedsAToken) {
  ServerProcess open_to_all({"--bind=0.0.0.0"});
  EXPECT_FALSE(open_to_all.ok());  // refused to start
}

TEST(Auth, TokenIsRequiredOfEveryCall) {
  const std::string token_file = TempFile("token", "s3cret-token\n");
  ServerProcess server({"--auth_token_file=" + token_file});
  ASSERT_TRUE(server.ok());
  cg::GetVersionReply version;
  grpc::Status s = server.stub().GetVersion(Ctx().get(), {}, &version);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("requires a token"));
  s = server.stub().GetVersion(Ctx("", "wrong").get(), {}, &version);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = server.stub().GetVersion(Ctx("", "s3cret-token").get(), {}, &version);
  EXPECT_TRUE(s.ok()) << s.error_message();
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(kMm);
  cg::StartSessionReply reply;
  EXPECT_EQ(server.stub().StartSession(Ctx().get(), r, &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(server.stub().StartSession(Ctx("", "s3cret-token").get(), r, &reply).ok());
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Auth, TlsWithAToken) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string key = dir + "/key.pem", cert = dir + "/cert.pem";
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                          "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
                          key + " -out " + cert + " >/dev/null 2>&1";
  if (system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a certificate here";
  const std::string token_file = TempFile("tls-token", "tls-token\n");
  ServerProcess server({"--auth_token_file=" + token_file, "--tls_cert_file=" + cert,
                        "--tls_key_file=" + key});
  ASSERT_GT(server.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadAll(cert);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto secure = cg::CompilerGymService::NewStub(
      grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args));
  cg::GetVersionReply version;
  grpc::Status s = secure->GetVersion(Ctx("", "tls-token").get(), {}, &version);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(version.service_version(), "0.2.5");
  // Plain text to a TLS port gets nowhere.
  auto plain = cg::CompilerGymService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto ctx = Ctx("", "tls-token");
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(plain->GetVersion(ctx.get(), {}, &version).ok());
}

}  // namespace
}  // namespace looptool
