// soak_bench: many clients hammer one looptool-server for minutes with random sessions, steps,
// forks, abandoned sessions and faults (bad requests, crashing and hanging kernels injected
// through the test server's fault injection, tests/faults), recording every call's status code and latency and the
// server's memory over time. Prints a Markdown report (and writes it to --out); exits 0 only when
// no call failed unexpectedly and the server stayed alive (and, when started here, exited 0 on
// SIGTERM).
//
//   bazel build -c opt //bench:soak_bench
//   bazel-bin/bench/soak_bench --clients=64 --minutes=30 --out=bench/results/soak.md
//
// Without --server it starts bazel-bin's (or its runfiles') tests/faults/looptool-test-server
// (looptool-server with fault injection linked in) with --port=0 --working_dir=<tmp> plus --server_args. Every call is expected to
// succeed except the faults: a bad request must fail with INVALID_ARGUMENT (or NOT_FOUND for an
// unknown session), the flops step after an injected crash with INTERNAL, after an injected
// hang with DEADLINE_EXCEEDED. Anything else that is not OK is unexpected (UNAVAILABLE: the
// server died or stopped answering).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/timing/host_cpu.h"
#include "bench/report_files.h"
#include "bench/server_process.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/compiler_gym_service.grpc.pb.h"

ABSL_FLAG(int, clients, 64, "client threads, each with its own channel (connection)");
ABSL_FLAG(double, minutes, 1, "how long the clients run (fractions allowed)");
ABSL_FLAG(std::string, server, "",
          "address (host:port) of a running server; empty: start service/looptool-server");
ABSL_FLAG(int, server_pid, 0,
          "with --server: its process id, for the memory samples (0: no memory samples)");
ABSL_FLAG(std::string, server_binary, "",
          "the server to start (default: looptool-test-server from the runfiles, else bazel-bin)");
ABSL_FLAG(std::string, server_args, "--eval_deadline=2 --session_idle_timeout=120",
          "extra flags for the started server, space-separated. A short --eval_deadline keeps "
          "injected hangs from monopolising the one kernel worker; the idle timeout reaps the "
          "abandoned sessions before they fill --max_sessions");
ABSL_FLAG(std::string, out, "", "Markdown file to write the report to (empty: stdout only)");
ABSL_FLAG(uint64_t, seed, 1, "random seed (client i uses seed * 1000003 + i)");
ABSL_FLAG(double, deadline, 60, "per-call deadline, seconds");
ABSL_FLAG(int, max_live, 8, "live sessions per client at most");
ABSL_FLAG(double, faults_per_minute, 1,
          "injected kernel faults (crash or hang) per client per minute, on average");
ABSL_FLAG(double, hang_fraction, 0.25, "share of the injected kernel faults that are hangs");
ABSL_FLAG(double, abandon_per_minute, 2,
          "sessions each client forgets without EndSession, per minute, on average");
ABSL_FLAG(double, sample_seconds, 10, "seconds between memory samples");

namespace looptool {
namespace {

namespace cg = compiler_gym;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// ---------------------------------------------------------------------------------------------
// What is recorded.

enum Kind {
  kStartSession,
  kForkSession,
  kEndSession,
  kStep,            // random actions, cheap observations
  kStepFlops,       // ... and flops (a kernel timed in a worker)
  kInjectFault,     // SendSessionParameter test.inject_fault
  kStepFault,       // the flops step that runs the injected fault
  kBadStep,         // out-of-range action or observation, unknown session, 5000 actions
  kBadAddBenchmark, // malformed program
  kBadParameter,    // unknown session parameter
  kGetSpaces,
  kNumKinds
};

const char* KindName(int k) {
  static const char* kNames[] = {"StartSession",
                                 "ForkSession",
                                 "EndSession",
                                 "Step (cheap observations)",
                                 "Step (+ flops)",
                                 "SendSessionParameter (inject fault)",
                                 "Step (injected fault + flops)",
                                 "Step (bad request)",
                                 "AddBenchmark (malformed program)",
                                 "SendSessionParameter (unknown key)",
                                 "GetSpaces"};
  return kNames[k];
}

const char* CodeName(int code) {
  static const char* kNames[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "?";
}

constexpr int kNumCodes = 17;

struct Tally {
  int64_t expected = 0, unexpected = 0;
};

struct Record {
  std::vector<float> latency_ms[kNumKinds];
  int64_t errors[kNumKinds] = {};
  Tally codes[kNumCodes];
  // (kind, code) of unexpected results: how many and the first message.
  std::map<std::pair<int, int>, std::pair<int64_t, std::string>> unexpected;

  void Merge(const Record& o) {
    for (int k = 0; k < kNumKinds; ++k) {
      latency_ms[k].insert(latency_ms[k].end(), o.latency_ms[k].begin(), o.latency_ms[k].end());
      errors[k] += o.errors[k];
    }
    for (int c = 0; c < kNumCodes; ++c) {
      codes[c].expected += o.codes[c].expected;
      codes[c].unexpected += o.codes[c].unexpected;
    }
    for (const auto& [key, v] : o.unexpected) {
      auto& mine = unexpected[key];
      if (mine.first == 0) mine.second = v.second;
      mine.first += v.first;
    }
  }
};

std::atomic<int64_t> g_calls{0};
std::atomic<int64_t> g_unexpected{0};
std::atomic<int64_t> g_live{0};  // sessions the clients hold (not counting abandoned ones)

// ---------------------------------------------------------------------------------------------
// The server's memory over time.

struct Memory : bench::ProcessMemory {
  double t = 0;             // seconds since the clients started (negative: before)
  int64_t calls = 0;
  int64_t live = 0;
};

Memory SampleMemory(pid_t pid, double t) {
  Memory m;
  static_cast<bench::ProcessMemory&>(m) = bench::SampleProcessMemory(pid);
  m.t = t;
  m.calls = g_calls.load();
  m.live = g_live.load();
  return m;
}

// ---------------------------------------------------------------------------------------------
// Clients.

struct Spaces {
  std::vector<int64_t> action_space_sizes;  // by action space index
  std::map<std::string, int> observation;   // name -> index
  int num_observations = 0;
};

const char* const kCatalog[] = {
    "benchmark://conv2d-v0/resnet18_conv2_3x3",
    "benchmark://conv2d-v0/resnet18_conv4_3x3",
    "benchmark://conv2d-v0/resnet18_conv3_3x3s2",
    "benchmark://conv2d-v0/resnet50_pointwise_256_64",
    "benchmark://conv2d-v0/mobilenet_depthwise_64_56s2",
    "benchmark://conv2d-v0/mobilenet_depthwise_512_14",
    "benchmark://conv2d-v0/looptune_conv2d_128_3x3",
    "benchmark://pool-v0/resnet_maxpool_3x3s2_64_56",
    "benchmark://pool-v0/maxpool_nhwc_2x2s2_256_28",
    "benchmark://pool-v0/maxpool2d_3x3s2_128",
    "benchmark://pool-v0/global_sumpool_512_7",
    "benchmark://reduce-v0/rowsum_1024_1024",
    "benchmark://reduce-v0/colsum_1024_1024",
    "benchmark://reduce-v0/rowmax_512_2048",
    "benchmark://reduce-v0/batchsum_64_64_256",
    "benchmark://reduce-v0/gemv_1024_1024",
    "benchmark://reduce-v0/gevm_1024_1024",
    "benchmark://transpose-v0/transpose_256_256",
    "benchmark://transpose-v0/transpose_1024_512",
    "benchmark://transpose-v0/hwc_to_chw_56_56_64",
    "benchmark://transpose-v0/chw_to_hwc_64_56_56",
    "benchmark://elementwise-v0/broadcast_rows_512_1024",
    "benchmark://elementwise-v0/concat_cols_256_512_512",
    "benchmark://elementwise-v0/add_relu_512_1024",
    "benchmark://mm_relu-v0/mlp_64_256_256",
    "benchmark://mm_relu-v0/ffn_128_768_768",
};

// Malformed programs for AddBenchmark, all INVALID_ARGUMENT except the empty one: with no
// program the server looks the URI up instead (CompilerGym's fallback), NOT_FOUND.
const char* const kMalformed[] = {
    "C[m,n] += A[m,k] * ; m=4 n=4 k=4",
    "C[m,n] += A[m,k] * B[k,n]",                     // no sizes
    "C[m,n] += A[m,k] * B[k,n]; m=100000 n=4 k=4",   // too large
    "C[m,n] += A[m,k] * B[k,q]; m=4 n=4 k=4",        // q has no size
    "))((; x=",
    "",
};

const char* const kCheapObservations[] = {"loops_tensor", "loop_tree",  "action_mask",
                                          "ir",           "stride_tensor", "ir_graph_networkx"};

class SoakClient {
 public:
  SoakClient(const std::string& address, const Spaces& spaces, uint64_t seed,
             Clock::time_point end)
      : spaces_(spaces), rng_(seed), end_(end) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetMaxReceiveMessageSize(64 << 20);
    stub_ = cg::CompilerGymService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    const double fpm = absl::GetFlag(FLAGS_faults_per_minute);
    const double apm = absl::GetFlag(FLAGS_abandon_per_minute);
    next_fault_ = Clock::now() + Exponential(fpm);
    next_abandon_ = Clock::now() + Exponential(apm);
  }

  void Run() {
    const int max_live = absl::GetFlag(FLAGS_max_live);
    while (Clock::now() < end_) {
      const auto now = Clock::now();
      if (live_.empty()) {
        Start();
        continue;
      }
      if (now >= next_fault_) {
        next_fault_ = now + Exponential(absl::GetFlag(FLAGS_faults_per_minute));
        InjectFault();
        continue;
      }
      if (now >= next_abandon_) {
        next_abandon_ = now + Exponential(absl::GetFlag(FLAGS_abandon_per_minute));
        Forget(Pick());
        continue;
      }
      const bool room = static_cast<int>(live_.size()) < max_live;
      // Weights: step 75, start 7, fork 4, end 6, bad request 5, GetSpaces 1.
      std::discrete_distribution<int> what({75.0, room ? 7.0 : 0.0, room ? 4.0 : 0.0,
                                            room ? 6.0 : 13.0, 5.0, 1.0});
      switch (what(rng_)) {
        case 0: Step(); break;
        case 1: Start(); break;
        case 2: Fork(); break;
        case 3: End(); break;
        case 4: BadRequest(); break;
        case 5: GetSpaces(); break;
      }
    }
    // Sessions still held are ended only by the server's idle reaper or its shutdown.
    g_live.fetch_sub(static_cast<int64_t>(live_.size()));
  }

  Record& record() { return record_; }

 private:
  struct Live {
    int64_t id;
    int action_space;
  };

  std::chrono::nanoseconds Exponential(double per_minute) {
    if (per_minute <= 0) return std::chrono::hours(24 * 365);
    std::exponential_distribution<double> d(per_minute / 60.0);
    return std::chrono::nanoseconds(static_cast<int64_t>(d(rng_) * 1e9));
  }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  size_t Pick() { return static_cast<size_t>(Uniform(0, static_cast<int>(live_.size()) - 1)); }
  void Forget(size_t i) {
    live_.erase(live_.begin() + static_cast<long>(i));
    g_live.fetch_sub(1);
  }
  void Hold(int64_t id, int space) {
    live_.push_back({id, space});
    g_live.fetch_add(1);
  }

  // Times `call` (which takes a ClientContext*) and records its status; `expected` is the
  // code it should end with. Returns the status.
  template <typename Call>
  grpc::Status Timed(Kind kind, grpc::StatusCode expected, Call call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(
                         static_cast<int64_t>(absl::GetFlag(FLAGS_deadline) * 1000)));
    const auto t0 = Clock::now();
    const grpc::Status s = call(&ctx);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    record_.latency_ms[kind].push_back(static_cast<float>(ms));
    const int code = std::clamp(static_cast<int>(s.error_code()), 0, kNumCodes - 1);
    if (!s.ok()) ++record_.errors[kind];
    if (s.error_code() == expected) {
      ++record_.codes[code].expected;
    } else {
      ++record_.codes[code].unexpected;
      g_unexpected.fetch_add(1);
      auto& u = record_.unexpected[{kind, code}];
      if (u.first++ == 0) {
        u.second = s.ok() ? absl::StrFormat("OK where %s was expected", CodeName(expected))
                          : s.error_message();
      }
    }
    g_calls.fetch_add(1);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // do not spin on a dead server
    }
    return s;
  }

  std::string RandomBenchmark() {
    if (Chance(0.75)) {
      return absl::StrFormat("benchmark://mm64_256_16_range-v0/mm%d_%d_%d", Uniform(16, 256),
                             Uniform(16, 256), Uniform(16, 256));
    }
    return kCatalog[Uniform(0, static_cast<int>(std::size(kCatalog)) - 1)];
  }

  int RandomCheapObservation() {
    const int i = Uniform(0, static_cast<int>(std::size(kCheapObservations)) - 1);
    return spaces_.observation.at(kCheapObservations[i]);
  }

  void AddCheapObservations(cg::StepRequest& r, int max) {
    const int n = Uniform(0, max);
    for (int i = 0; i < n; ++i) {
      r.add_observation_space(RandomCheapObservation());
    }
  }

  void Start() {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(RandomBenchmark());
    // LoopTool's own spaces, loop_tool (0) and loop_tune (1); upstream loop_tool-v0's simple
    // and split apply only to loop_tool-cpu-v0 benchmarks (tests/service/loop_tool_v0_test).
    const int space =
        Uniform(0, std::min(1, static_cast<int>(spaces_.action_space_sizes.size()) - 1));
    r.set_action_space(space);
    if (Chance(0.5)) {
      r.add_observation_space(RandomCheapObservation());
    }
    cg::StartSessionReply reply;
    const grpc::Status s = Timed(kStartSession, grpc::StatusCode::OK, [&](grpc::ClientContext* c) {
      return stub_->StartSession(c, r, &reply);
    });
    if (s.ok()) Hold(reply.session_id(), space);
  }

  void Fork() {
    const Live parent = live_[Pick()];
    cg::ForkSessionRequest r;
    r.set_session_id(parent.id);
    cg::ForkSessionReply reply;
    const grpc::Status s = Timed(kForkSession, grpc::StatusCode::OK, [&](grpc::ClientContext* c) {
      return stub_->ForkSession(c, r, &reply);
    });
    if (s.ok()) Hold(reply.session_id(), parent.action_space);
  }

  void End() {
    const size_t i = Pick();
    cg::EndSessionRequest r;
    r.set_session_id(live_[i].id);
    cg::EndSessionReply reply;
    Timed(kEndSession, grpc::StatusCode::OK,
          [&](grpc::ClientContext* c) { return stub_->EndSession(c, r, &reply); });
    Forget(i);
  }

  void Step() {
    const Live& session = live_[Pick()];
    cg::StepRequest r;
    r.set_session_id(session.id);
    const int64_t n = spaces_.action_space_sizes[session.action_space];
    for (int i = Uniform(1, 8); i > 0; --i) {
      r.add_action()->set_int64_value(std::uniform_int_distribution<int64_t>(0, n - 1)(rng_));
    }
    AddCheapObservations(r, 2);
    Kind kind = kStep;
    if (Chance(0.05)) {
      r.add_observation_space(spaces_.observation.at("flops"));
      kind = kStepFlops;
    }
    cg::StepReply reply;
    Timed(kind, grpc::StatusCode::OK,
          [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
  }

  void InjectFault() {
    if (live_.empty()) Start();
    if (live_.empty()) return;
    const Live session = live_[Pick()];
    const bool hang = Chance(absl::GetFlag(FLAGS_hang_fraction));
    cg::SendSessionParameterRequest p;
    p.set_session_id(session.id);
    auto* param = p.add_parameter();
    param->set_key("test.inject_fault");
    param->set_value(hang ? "hang" : "crash");
    cg::SendSessionParameterReply preply;
    if (!Timed(kInjectFault, grpc::StatusCode::OK, [&](grpc::ClientContext* c) {
           return stub_->SendSessionParameter(c, p, &preply);
         }).ok()) {
      return;
    }
    cg::StepRequest r;
    r.set_session_id(session.id);
    r.add_observation_space(spaces_.observation.at("flops"));
    cg::StepReply reply;
    Timed(kStepFault,
          hang ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::INTERNAL,
          [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
  }

  void BadRequest() {
    const Live session = live_[Pick()];
    const int64_t n = spaces_.action_space_sizes[session.action_space];
    switch (Uniform(0, 5)) {
      case 0: {  // an action index out of range
        cg::StepRequest r;
        r.set_session_id(session.id);
        r.add_action()->set_int64_value(Chance(0.5) ? n + Uniform(0, 1000) : -Uniform(1, 1000));
        AddCheapObservations(r, 1);
        cg::StepReply reply;
        Timed(kBadStep, grpc::StatusCode::INVALID_ARGUMENT,
              [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
        break;
      }
      case 1: {  // an unknown session
        cg::StepRequest r;
        // Ids are spread far apart; a random one of 62 bits is practically never live.
        r.set_session_id(static_cast<int64_t>(rng_() >> 2) | 1);
        r.add_action()->set_int64_value(0);
        cg::StepReply reply;
        Timed(kBadStep, grpc::StatusCode::NOT_FOUND,
              [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
        break;
      }
      case 2: {  // an unknown observation space
        cg::StepRequest r;
        r.set_session_id(session.id);
        r.add_action()->set_int64_value(0);
        r.add_observation_space(Chance(0.5) ? spaces_.num_observations + Uniform(0, 100)
                                            : -Uniform(1, 100));
        cg::StepReply reply;
        Timed(kBadStep, grpc::StatusCode::INVALID_ARGUMENT,
              [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
        break;
      }
      case 3: {  // a malformed program
        cg::AddBenchmarkRequest r;
        auto* b = r.add_benchmark();
        b->set_uri(absl::StrFormat("benchmark://soak-v0/bad%d", Uniform(0, 1 << 20)));
        const std::string program =
            kMalformed[Uniform(0, static_cast<int>(std::size(kMalformed)) - 1)];
        b->mutable_program()->set_contents(program);
        cg::AddBenchmarkReply reply;
        Timed(kBadAddBenchmark,
              program.empty() ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::INVALID_ARGUMENT,
              [&](grpc::ClientContext* c) { return stub_->AddBenchmark(c, r, &reply); });
        break;
      }
      case 4: {  // 5000 actions, more than a step may carry
        cg::StepRequest r;
        r.set_session_id(session.id);
        for (int i = 0; i < 5000; ++i) {
          r.add_action()->set_int64_value(std::uniform_int_distribution<int64_t>(0, n - 1)(rng_));
        }
        cg::StepReply reply;
        Timed(kBadStep, grpc::StatusCode::INVALID_ARGUMENT,
              [&](grpc::ClientContext* c) { return stub_->Step(c, r, &reply); });
        break;
      }
      case 5: {  // an unknown session parameter
        cg::SendSessionParameterRequest p;
        p.set_session_id(session.id);
        auto* param = p.add_parameter();
        param->set_key("soak.no_such_parameter");
        param->set_value("1");
        cg::SendSessionParameterReply reply;
        Timed(kBadParameter, grpc::StatusCode::INVALID_ARGUMENT, [&](grpc::ClientContext* c) {
          return stub_->SendSessionParameter(c, p, &reply);
        });
        break;
      }
    }
  }

  void GetSpaces() {
    cg::GetSpacesRequest r;
    cg::GetSpacesReply reply;
    Timed(kGetSpaces, grpc::StatusCode::OK,
          [&](grpc::ClientContext* c) { return stub_->GetSpaces(c, r, &reply); });
  }

  const Spaces& spaces_;
  std::mt19937_64 rng_;
  const Clock::time_point end_;
  std::unique_ptr<cg::CompilerGymService::Stub> stub_;
  std::vector<Live> live_;
  Clock::time_point next_fault_, next_abandon_;
  Record record_;
};

// ---------------------------------------------------------------------------------------------
// The report.

double Percentile(const std::vector<float>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[static_cast<size_t>(p * (sorted.size() - 1) + 0.5)];
}

std::string Escape(std::string s) {
  for (char& c : s) {
    if (c == '|' || c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

bool GetSpacesOnce(const std::string& address, Spaces* spaces, std::string* error) {
  auto stub = cg::CompilerGymService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  cg::GetSpacesReply reply;
  const grpc::Status s = stub->GetSpaces(&ctx, cg::GetSpacesRequest(), &reply);
  if (!s.ok()) {
    *error = s.error_message();
    return false;
  }
  for (const auto& a : reply.action_space_list()) {
    const auto& space = a.space();
    spaces->action_space_sizes.push_back(space.has_named_discrete()
                                             ? space.named_discrete().name_size()
                                             : space.discrete().n());
  }
  for (int i = 0; i < reply.observation_space_list_size(); ++i) {
    spaces->observation[reply.observation_space_list(i).name()] = i;
  }
  spaces->num_observations = reply.observation_space_list_size();
  for (const char* name : kCheapObservations) {
    if (!spaces->observation.count(name)) {
      *error = std::string("the server has no observation space ") + name;
      return false;
    }
  }
  if (!spaces->observation.count("flops") || spaces->action_space_sizes.empty()) {
    *error = "the server has no flops observation or no action space";
    return false;
  }
  for (int64_t n : spaces->action_space_sizes) {
    if (n <= 0) {
      *error = "an action space is empty";
      return false;
    }
  }
  return true;
}

bool Alive(const std::string& address, pid_t pid) {
  if (pid > 0) {
    if (kill(pid, 0) != 0) return false;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;  // only for our child
  }
  auto stub = cg::CompilerGymService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  cg::GetVersionReply reply;
  return stub->GetVersion(&ctx, cg::GetVersionRequest(), &reply).ok();
}

// What the clients' run produced: memory samples, every call's record, how long it took.
struct SoakRun {
  std::vector<Memory> samples;
  Record all;
  double duration = 0;
};

// `clients` clients against `address` until `minutes` have passed, the server (`pid`) sampled
// every `every` seconds.
SoakRun RunClients(const std::string& address, const Spaces& spaces, pid_t pid, int clients,
                   double minutes, double every) {
  SoakRun run;
  const auto t0 = Clock::now();
  run.samples.push_back(SampleMemory(pid, 0));
  const auto end = t0 + std::chrono::nanoseconds(static_cast<int64_t>(minutes * 60e9));
  std::vector<std::unique_ptr<SoakClient>> soak;
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  for (int i = 0; i < clients; ++i) {
    soak.push_back(std::make_unique<SoakClient>(address, spaces, seed * 1000003 + i, end));
  }
  std::vector<std::thread> threads;
  for (auto& c : soak) threads.emplace_back([&c] { c->Run(); });
  for (int n = 1;; ++n) {
    const auto next = t0 + std::chrono::nanoseconds(static_cast<int64_t>(n * every * 1e9));
    if (next >= end) break;
    std::this_thread::sleep_until(next);  // the sampling period, not a synchronisation
    run.samples.push_back(SampleMemory(pid, Seconds(t0, Clock::now())));
    const Memory& m = run.samples.back();
    std::fprintf(stderr,
                 "soak_bench: %5.0f s  %lld calls  %lld unexpected  server %.1f MB  workers %d "
                 "(%.1f MB)  threads %d  live sessions %lld\n",
                 m.t, static_cast<long long>(m.calls),
                 static_cast<long long>(g_unexpected.load()), m.server_mb, m.workers,
                 m.workers_mb, m.threads, static_cast<long long>(m.live));
  }
  for (auto& t : threads) t.join();
  run.duration = Seconds(t0, Clock::now());
  run.samples.push_back(SampleMemory(pid, run.duration));
  for (auto& c : soak) run.all.Merge(c->record());
  return run;
}

// The calls table; `total` receives the number of calls.
std::string CallsSection(Record& all, int64_t& total) {
  std::string r = "## Calls\n\n| call | count | not OK | p50 ms | p90 ms | p99 ms | max ms |\n"
                  "|---|---:|---:|---:|---:|---:|---:|\n";
  for (int k = 0; k < kNumKinds; ++k) {
    std::vector<float>& v = all.latency_ms[k];
    std::sort(v.begin(), v.end());
    total += static_cast<int64_t>(v.size());
    if (v.empty()) {
      r += absl::StrFormat("| %s | 0 | 0 | | | | |\n", KindName(k));
      continue;
    }
    r += absl::StrFormat("| %s | %d | %d | %.2f | %.2f | %.2f | %.1f |\n", KindName(k),
                         static_cast<long long>(v.size()), static_cast<long long>(all.errors[k]),
                         Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 0.99), v.back());
  }
  r += absl::StrFormat("| all | %d | | | | | |\n\n", static_cast<long long>(total));
  return r;
}

// The status codes table; `unexpected` receives the number of unexpected results.
std::string CodesSection(const Record& all, int64_t& unexpected) {
  std::string r =
      "## Status codes\n\nExpected: OK for ordinary calls; INVALID_ARGUMENT / NOT_FOUND for the "
      "bad requests (NOT_FOUND for an unknown session or an AddBenchmark without a program); "
      "INTERNAL after an injected crash, DEADLINE_EXCEEDED after an injected hang. "
      "Anything else is unexpected (an OK where an error was expected included).\n\n"
      "| code | count | expected | unexpected |\n|---|---:|---:|---:|\n";
  for (int c = 0; c < kNumCodes; ++c) {
    const Tally& t = all.codes[c];
    if (t.expected + t.unexpected == 0) continue;
    unexpected += t.unexpected;
    r += absl::StrFormat("| %s | %d | %d | %d |\n", CodeName(c),
                         static_cast<long long>(t.expected + t.unexpected),
                         static_cast<long long>(t.expected), static_cast<long long>(t.unexpected));
  }
  r += "\n";
  if (!all.unexpected.empty()) {
    r += "### Unexpected results\n\n| call | code | count | first message |\n|---|---|---:|---|\n";
    for (const auto& [key, v] : all.unexpected) {
      r += absl::StrFormat("| %s | %s | %d | %s |\n", KindName(key.first), CodeName(key.second),
                           static_cast<long long>(v.first), Escape(v.second));
    }
    r += "\n";
  }
  return r;
}

struct RssSummary {
  double start = 0, end = 0, max = 0;
};

// The memory table: one row per sample minute (every sample for short runs), at most ~40, the
// last always.
std::string MemorySection(const std::vector<Memory>& samples, double every, RssSummary& rss) {
  std::string r = absl::StrFormat(
      "## Memory (every %g s; VmRSS from /proc; workers: the server's descendant processes)\n\n"
      "| t (s) | server RSS MB | server threads | workers | workers RSS MB | total MB | calls so "
      "far | live sessions held |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      every);
  bool any = false;
  for (const Memory& m : samples) {
    if (!m.ok) continue;
    if (!any) rss.start = m.server_mb;
    any = true;
    rss.end = m.server_mb;
    rss.max = std::max(rss.max, m.server_mb);
  }
  std::vector<size_t> rows;
  const double span = samples.back().t;
  const double step = std::max(span / 39.0, span > 400 ? 60.0 : 0.0);
  double next_t = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i + 1 == samples.size() || samples[i].t + 1e-6 >= next_t) {
      rows.push_back(i);
      next_t = samples[i].t + step;
    }
  }
  for (size_t i : rows) {
    const Memory& m = samples[i];
    if (!m.ok) {
      r += absl::StrFormat("| %.0f | - | - | - | - | - | %d | %d |\n", m.t,
                           static_cast<long long>(m.calls), static_cast<long long>(m.live));
      continue;
    }
    r += absl::StrFormat("| %.0f | %.1f | %d | %d | %.1f | %.1f | %d | %d |\n", m.t, m.server_mb,
                         m.threads, m.workers, m.workers_mb, m.server_mb + m.workers_mb,
                         static_cast<long long>(m.calls), static_cast<long long>(m.live));
  }
  return r + "\n";
}

// The report's header: host, date, duration, server, what each client does.
std::string Header(const bench::ServerProcess& started, const std::string& address, pid_t pid,
                   const std::string& stop, std::time_t wall_start, double duration, int clients) {
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&wall_start));
  std::string r = "# soak_bench\n\n";
  r += absl::StrFormat("- Host: %s, %u CPUs\n", HostCpuModel(), std::thread::hardware_concurrency());
  r += absl::StrFormat("- Date: %s\n", date);
  r += absl::StrFormat("- Duration: %.1f s (--minutes=%g), clients: %d, seed: %d\n", duration,
                       absl::GetFlag(FLAGS_minutes), clients,
                       static_cast<long long>(absl::GetFlag(FLAGS_seed)));
  if (started.pid > 0) {
    r += absl::StrFormat("- Server: `%s %s` (pid %d); after SIGTERM it %s\n", started.binary,
                         started.args, static_cast<int>(started.pid), stop);
  } else {
    r += absl::StrFormat("- Server: %s (pid %s)\n", address,
                         pid > 0 ? std::to_string(pid) : "unknown: no memory samples");
  }
  r += absl::StrFormat(
      "- Each client: its own channel, at most %d live sessions, per-call deadline %g s; random "
      "steps of 1-8 actions with 0-2 cheap observations (5%% with flops), starts (75%% random "
      "matmuls mm64_256_16_range-v0/mmM_N_K, M,N,K in 16..256, else catalog benchmarks; "
      "action space 0 or 1), forks, ends, %g abandoned sessions/min, bad requests, %g injected "
      "kernel faults/min (%g%% hangs)\n\n",
      absl::GetFlag(FLAGS_max_live), absl::GetFlag(FLAGS_deadline),
      absl::GetFlag(FLAGS_abandon_per_minute), absl::GetFlag(FLAGS_faults_per_minute),
      100 * absl::GetFlag(FLAGS_hang_fraction));
  return r;
}

int Main(const char* argv0) {
  const int clients = absl::GetFlag(FLAGS_clients);
  const double minutes = absl::GetFlag(FLAGS_minutes);
  if (clients <= 0 || !(minutes > 0)) {
    std::fprintf(stderr, "soak_bench: --clients and --minutes must be positive\n");
    return 2;
  }
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    if (absl::Status s = bench::PrepareReportFile(out); !s.ok()) {
      std::fprintf(stderr, "soak_bench: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  std::string address = absl::GetFlag(FLAGS_server);
  bench::ServerProcess started;
  pid_t pid = absl::GetFlag(FLAGS_server_pid);
  if (address.empty()) {
    std::string binary = absl::GetFlag(FLAGS_server_binary);
    if (binary.empty()) binary = bench::FindBinary(argv0, "tests/faults/looptool-test-server");
    if (binary.empty()) {
      std::fprintf(stderr, "soak_bench: no looptool-test-server found; build "
                           "//tests/faults:looptool-test-server or pass --server_binary\n");
      return 1;
    }
    std::string error;
    if (!bench::StartServer(binary, bench::SplitArgs(absl::GetFlag(FLAGS_server_args)), "soak",
                            &started, &error)) {
      std::fprintf(stderr, "soak_bench: %s\n", error.c_str());
      return 1;
    }
    address = absl::StrFormat("127.0.0.1:%d", started.port);
    pid = started.pid;
  }
  std::fprintf(stderr, "soak_bench: %d clients for %.2f min against %s (pid %d)\n", clients,
               minutes, address.c_str(), static_cast<int>(pid));
  Spaces spaces;
  std::string error;
  if (!GetSpacesOnce(address, &spaces, &error)) {
    std::fprintf(stderr, "soak_bench: GetSpaces failed: %s\n", error.c_str());
    if (started.pid > 0) {
      bool ignored = false;
      bench::StopServer(started.pid, &ignored);
    }
    return 1;
  }
  const std::time_t wall_start = std::time(nullptr);
  const double every = std::max(1.0, absl::GetFlag(FLAGS_sample_seconds));
  SoakRun run = RunClients(address, spaces, pid, clients, minutes, every);
  const bool alive = Alive(address, started.pid > 0 ? started.pid : 0) &&
                     (pid <= 0 || run.samples.back().ok);
  std::string stop = "not stopped (an existing server)";
  bool exit_ok = true;
  if (started.pid > 0) {
    stop = bench::StopServer(started.pid, &exit_ok);
    if (exit_ok) std::filesystem::remove_all(started.dir);
  }

  int64_t total = 0, unexpected = 0;
  RssSummary rss;
  std::string r = Header(started, address, pid, stop, wall_start, run.duration, clients);
  r += CallsSection(run.all, total);
  r += CodesSection(run.all, unexpected);
  r += MemorySection(run.samples, every, rss);
  r += absl::StrFormat(
      "soak: %d calls, %d unexpected errors, server alive: %s, RSS start %.1f MB end %.1f MB max "
      "%.1f MB\n",
      static_cast<long long>(total), static_cast<long long>(unexpected), alive ? "yes" : "no",
      rss.start, rss.end, rss.max);
  std::printf("%s", r.c_str());
  std::fflush(stdout);
  const std::string out = absl::GetFlag(FLAGS_out);
  bool written = true;
  if (!out.empty()) {
    if (absl::Status s = bench::WriteReportFile(out, r); !s.ok()) {
      std::fprintf(stderr, "soak_bench: %s\n", s.ToString().c_str());
      written = false;
    }
  }
  if (started.pid > 0 && !exit_ok) {
    std::fprintf(stderr, "soak_bench: the server %s (log: %s/server.log)\n", stop.c_str(),
                 started.dir.c_str());
  }
  return unexpected == 0 && alive && exit_ok && written ? 0 : 1;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  return looptool::Main(argv[0]);
}
