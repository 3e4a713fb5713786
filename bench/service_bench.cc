// service_bench: Step round trips over loopback against a real LoopTool server (started in this
// process, listening on 127.0.0.1, its kernel worker on its own core). Measures the latency of a
// cursor action that returns loops_tensor (p50/p90/p99 over many steps, one client), and steps
// per second with 1, 4 and 16 concurrent clients, each on its own session and channel.
//
//   bazel run -c opt //bench:service_bench -- --steps=20000 --seconds=3
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "backend/timing/worker_main.h"
#include "bench/report_files.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/compiler_gym_service.grpc.pb.h"
#include "service/server.h"
#include "service/server_flags.h"

ABSL_FLAG(int, steps, 20000, "steps timed for the latency percentiles");
ABSL_FLAG(double, seconds, 3, "seconds per throughput run");
ABSL_FLAG(bool, clients_on_server_cpus, true,
          "run the clients on the server's CPUs (those its kernel workers do not use); false: "
          "let them run on every CPU, the kernel worker's included");
ABSL_FLAG(std::string, out, "bench/results/service_bench.md", "where the table goes ('' = none)");

namespace looptool {
namespace {

namespace cg = compiler_gym;
using Clock = std::chrono::steady_clock;

constexpr char kBenchmark[] = "benchmark://mm64_256_16_range-v0/mm112_208_256";
constexpr int kDown = 1, kUp = 0, kLoopsTensor = 2;

// With --noclients_on_server_cpus, lets this thread (a client) run on every CPU. Otherwise it
// keeps the server's pinning (inherited from main), as the CLI's embedded server does.
void Unpin() {
  if (absl::GetFlag(FLAGS_clients_on_server_cpus)) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : service::AllowedCpus()) CPU_SET(c, &set);
  const int n = static_cast<int>(std::thread::hardware_concurrency());
  for (int c = 0; c < n; ++c) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

struct Client {
  explicit Client(const std::string& address)
      : stub(cg::CompilerGymService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(kBenchmark);
    cg::StartSessionReply reply;
    grpc::ClientContext ctx;
    ok = stub->StartSession(&ctx, r, &reply).ok();
    session = reply.session_id();
  }
  // One cursor step (down, then up, alternating) returning loops_tensor.
  bool Step() {
    cg::StepRequest r;
    r.set_session_id(session);
    r.add_action()->set_int64_value((n++ % 2) ? kUp : kDown);
    r.add_observation_space(kLoopsTensor);
    cg::StepReply reply;
    grpc::ClientContext ctx;
    return stub->Step(&ctx, r, &reply).ok() && reply.observation_size() == 1;
  }
  std::unique_ptr<cg::CompilerGymService::Stub> stub;
  int64_t session = 0;
  int64_t n = 0;
  bool ok = false;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

int Main() {
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    if (absl::Status s = bench::PrepareReportFile(out); !s.ok()) {
      std::fprintf(stderr, "service_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  absl::StatusOr<service::ServerConfig> server_config = service::ServerConfigFromFlags();
  if (!server_config.ok()) {
    std::fprintf(stderr, "service_bench: %s\n", server_config.status().ToString().c_str());
    return 1;
  }
  const service::ServerConfig config = *std::move(server_config);
  // Process-wide pinning is main's (LoopToolServer::Start leaves it alone): this process's
  // threads (server, clients) stay off the kernel worker's core.
  service::PinAwayFrom(config.workers.cores);
  auto server = service::LoopToolServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*server)->address();
  std::string report = absl::StrFormat(
      "# service_bench\n\nServer %s in process, kernel worker on cpu %d; %u CPUs; clients over "
      "loopback TCP, one session and one channel each, stepping the cursor (down/up) on %s and "
      "receiving loops_tensor (320 floats). Clients run %s.\n\n",
      address, (*server)->eval_cores()[0], std::thread::hardware_concurrency(), kBenchmark,
      absl::GetFlag(FLAGS_clients_on_server_cpus) ? "on the server's CPUs"
                                                  : "on every CPU");

  // The Step handler alone (no gRPC) and its parts: bench/engine_micro_bench (Google Benchmark).
  // Below, hand-rolled: per-call percentiles across client threads, which it does not compute.
  std::thread([&] {
    Unpin();
    Client c(address);
    for (int i = 0; i < 2000; ++i) c.Step();  // warm-up
    std::vector<double> us;
    const int steps = absl::GetFlag(FLAGS_steps);
    us.reserve(steps);
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      if (!c.Step()) std::fprintf(stderr, "step failed\n");
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::vector<double> empty;  // the gRPC floor: GetVersion, an empty request
    for (int i = 0; i < steps; ++i) {
      cg::GetVersionReply reply;
      grpc::ClientContext ctx;
      const auto t0 = Clock::now();
      c.stub->GetVersion(&ctx, cg::GetVersionRequest(), &reply);
      empty.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    report += absl::StrFormat(
        "## Round trip, one client (%d calls each)\n\n| call | p50 | p90 | p99 | min |\n"
        "|---|---:|---:|---:|---:|\n"
        "| Step (cursor action + loops_tensor) | %.1f us | %.1f us | %.1f us | %.1f us |\n"
        "| GetVersion (empty; gRPC's floor here) | %.1f us | %.1f us | %.1f us | %.1f us |\n\n",
        steps, Percentile(us, 0.5), Percentile(us, 0.9), Percentile(us, 0.99), Percentile(us, 0),
        Percentile(empty, 0.5), Percentile(empty, 0.9), Percentile(empty, 0.99),
        Percentile(empty, 0));
  }).join();

  report += "## Throughput\n\n| clients | steps/s | p50 latency | p99 latency |\n|---:|---:|---:|---:|\n";
  for (int clients : {1, 4, 16}) {
    std::vector<std::vector<double>> lat(clients);
    std::atomic<int64_t> total{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        Unpin();
        Client c(address);
        for (int i = 0; i < 200; ++i) c.Step();
        while (!stop.load()) {
          const auto t0 = Clock::now();
          c.Step();
          lat[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          total.fetch_add(1);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int64_t start = total.load();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds)));
    const int64_t done = total.load() - start;
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    stop = true;
    for (auto& th : threads) th.join();
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    report += absl::StrFormat("| %d | %.0f | %.1f us | %.1f us |\n", clients, done / secs,
                              Percentile(all, 0.5), Percentile(all, 0.99));
  }
  std::printf("%s", report.c_str());
  const std::string out = absl::GetFlag(FLAGS_out);
  (*server)->Shutdown();
  if (!out.empty()) {
    if (absl::Status s = bench::WriteReportFile(out, report); !s.ok()) {
      std::fprintf(stderr, "service_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  absl::ParseCommandLine(argc, argv);
  return looptool::Main();
}
