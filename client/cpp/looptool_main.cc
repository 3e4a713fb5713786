// looptool: the command line of LoopTool.
//
//   looptool tune --benchmark=URI|FILE [--search=evolution] [--policy=FILE|NAME] [--time-limit=10]
//                 [--server=HOST:PORT] [--store=FILE] [--records=FILE] [--json]
//   looptool tune --dataset=NAME [--split=test] | --benchmark=URI,URI,...
//                 [--servers=HOST:PORT,HOST:PORT,...] [--store=FILE] [--json]
//   looptool eval --benchmark=URI|FILE --actions=split_4,down,... [--eval_seconds=1]
//                 [--server=...] [--json]
//   looptool benchmarks [--dataset=NAME]
//   looptool schedules --store=FILE [--host=TEXT] [--json]
//   looptool export --output=DIR [--library=NAME] --store=FILE [--host=TEXT] [--benchmark=...]
//   looptool export --output=DIR [--library=NAME] --benchmark=URI|FILE [--actions=a,b,...]
//   looptool export --output=DIR [--library=NAME] --benchmark=URI|FILE,URI|FILE,...
//   looptool tune ... --export-dir=DIR [--library=NAME]
//   looptool peak [--isa=ISA] [--eval_cores=N] [--json]
//
// Without --server(s) it starts an embedded LoopTool server on 127.0.0.1 (its kernel worker
// pinned to the last CPU) and talks to it over gRPC like any other client. Many benchmarks are
// spread over --servers, one at a time per server; a server that dies costs only its benchmark in
// flight, which another server tunes again. --store keeps the best schedule per (benchmark, host
// CPU, action space) in an SQLite file that later runs start from; --records keeps every kernel
// the searches measure (client/cpp/tuning_records.h), for training on. `export` writes tuned
// kernels as a C library (client/cpp/kernel_library.h): the stored schedules, one program's
// actions, or (tune --export-dir) the best a tune run found, each compiled and timed by the
// server again; a stored schedule that no longer replays gives way to the benchmark's next one,
// and exporting the whole store skips a benchmark none of whose schedules replays. Flags may be
// spelled with dashes or underscores, as --flag=value or --flag value.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "backend/timing/worker_main.h"
#include "client/cpp/env.h"
#include "client/cpp/fleet.h"
#include "client/cpp/kernel_library.h"
#include "client/cpp/schedule_store.h"
#include "client/cpp/tuning_records.h"
#include "client/cpp/search/search.h"
#include "datasets/split.h"
#include "nlohmann/json.hpp"
#include "service/server.h"
#include "service/server_flags.h"
#include "util/status_macros.h"

ABSL_FLAG(std::string, benchmark, "benchmark://mm64_256_16_range-v0/mm112_208_256",
          "a benchmark URI, a bare mmM_N_K, or a file holding a program in the loop-nest language");
ABSL_FLAG(std::string, search, "evolution",
          "greedy1, greedy2, beam2dfs, beam4dfs, beam2bfs, beam4bfs, random, evolution, policy "
          "(a trained policy's episode, only its final state timed) or policy_guided");
ABSL_FLAG(std::string, policy, "",
          "policy and policy_guided (and evolution's seed): a policy file from `python3 -m "
          "looptool.rl.train` or `looptool.rl.imitate`, or a built-in one by name: "
          "sketch_value (the default of the policy searches, "
          "datasets/policies/sketch_value.json), looptune_dqn (evolution's seed, "
          "datasets/policies/looptune_dqn.json) or loop_set (builds the schedule from the "
          "untiled nest in loop_nest, learned from tuning records: each server's ISA's, "
          "datasets/policies/loop_set.json for AVX-512, loop_set_avx2.json for AVX2 and SSE)");
ABSL_FLAG(int, policy_candidates, 16,
          "policy, with a loop_set policy that has a cost model: its likeliest episodes per "
          "wave, untimed, timed in the order its cost model ranks them, another wave of the next "
          "likeliest while time is left (1: the greedy episode only; a policy with member "
          "networks shares them between its networks); policy_guided ranks its first wave's "
          "shorter candidates (the start, ...) as unlikely as its episode of this rank, 1..1024");
ABSL_FLAG(int, policy_timed, 64,
          "policy, with --policy_candidates above 1: the candidates timed in all waves, this "
          "many at most (the first whatever the time, the others while --policy_seconds lasts), "
          "the fastest kept, 1..1024");
ABSL_FLAG(double, policy_seconds, 0.3,
          "policy, with --policy_candidates above 1: its budget (--time_limit where shorter), "
          "half of it for the first wave's episodes, the rest for timing them and the next "
          "waves, 0.001..3600");
ABSL_FLAG(int, guided_candidates, 256,
          "policy_guided, with a loop_set policy: its likeliest episodes per wave, timed in the "
          "order its cost model ranks them while the time lasts, another wave while time is "
          "left, 1..1024");
ABSL_FLAG(int, guided_timed, 1024,
          "policy_guided, with a loop_set policy: the candidates timed in all waves, this many at "
          "most, 1..1024");
ABSL_FLAG(double, guided_neighbor_share, 0.15,
          "policy_guided, with a loop_set policy: the share of --time_limit its first wave's "
          "timings leave for the fastest's neighbors (one of its tile factors changed, or two "
          "traded, their product kept), ranked by its cost model and timed, and theirs while a "
          "new one is the fastest, 0..0.5 (0: none; its first wave's episodes are played in the "
          "first 40%)");
ABSL_FLAG(double, pass_predicted_slower, 2.0,
          "policy and policy_guided, with a loop_set policy that has a cost model: a wave's "
          "candidate ranked more than this below the fastest kernel timed so far (its cost "
          "model's score, log2 GFLOPS, less loss_weight times its episode's loss: 2 is about "
          "4x slower) is passed over untimed, its time left to later waves, 0 or more (inf: "
          "every candidate timed while the time lasts)");
ABSL_FLAG(double, time_limit, 10, "seconds the search may take");
ABSL_FLAG(std::string, server, "", "HOST:PORT of a running server (default: start one here)");
ABSL_FLAG(bool, json, false, "print one JSON object instead of text");
ABSL_FLAG(std::string, actions, "", "eval: comma-separated action names to apply");
ABSL_FLAG(double, eval_seconds, 1.0,
          "eval: seconds of re-timings of the result (the server's fixed timing, repeated; the "
          "fastest counts, beside the FMA peak measured right after it), 0..60; 0: the one "
          "measurement a search would take");
ABSL_FLAG(std::string, action_space, "",
          "loop_tool, loop_tune or loop_nest (default: loop_nest for evolution, the policy's for "
          "the policy searches, else loop_tool)");
ABSL_FLAG(std::string, dataset, "",
          "benchmarks: list this dataset's benchmarks; tune: tune them (see --split)");
ABSL_FLAG(std::string, split, "all", "tune --dataset: all, train or test");
ABSL_FLAG(int, max_benchmarks, 1000, "tune: benchmarks at most (the first, in order), 1..100000");
ABSL_FLAG(std::string, servers, "",
          "tune: HOST:PORT,... servers to spread the benchmarks over, one at a time each");
ABSL_FLAG(std::string, store, "",
          "tune: SQLite schedule store to start from and keep the best in; schedules: to list");
ABSL_FLAG(std::string, records, "",
          "tune: SQLite file every measured kernel is recorded in (datasets/records/README.md)");
ABSL_FLAG(std::string, host, "", "schedules: only those timed on a CPU whose name has this");
ABSL_FLAG(uint64_t, seed, 0, "seed of the random and evolution searches");
ABSL_FLAG(std::string, output, "", "export: the directory the library is written to");
ABSL_FLAG(std::string, library, "looptool_kernels",
          "export, tune --export-dir: the library's name (a C identifier): lib<NAME>.so, lib<NAME>.a, "
          "<NAME>.h, <NAME>.json");
ABSL_FLAG(std::string, export_dir, "",
          "tune: export the best schedule's kernel as a library into this directory");
ABSL_FLAG(std::string, cc, "gcc", "export: the C compiler that assembles and links the library");
// The embedded server's flags (--timing, --timing_budget_ms, --eval_cores, --isa, ...) and
// --auth_token_file are service/server_flags.h's.
ABSL_FLAG(std::string, tls_ca_file, "",
          "--server: connect over TLS, trusting the PEM certificates in this file");
ABSL_FLAG(std::string, tls_server_name, "",
          "--server: the name the server's TLS certificate carries (default: the host)");

namespace looptool::client {
namespace {

using nlohmann::json;

// absl's flags are spelled with underscores; accept --time-limit as --time_limit.
std::vector<std::string> NormalizeFlags(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && absl::StartsWith(arg, "--")) {
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t j = 2; j < end; ++j) {
        if (arg[j] == '-') arg[j] = '_';
      }
    }
    out.push_back(arg);
  }
  return out;
}

struct Connected {
  std::unique_ptr<service::LoopToolServer> embedded;  // when no --server was given
  std::shared_ptr<Connection> connection;
  ConnectionOptions options;  // what it connected with (the token, TLS)
};

// The connection options the flags ask for: the token of --auth_token_file (read once, by the
// caller) and TLS.
absl::StatusOr<ConnectionOptions> ConnectionFlags(std::string token) {
  ConnectionOptions options;
  options.auth_token = std::move(token);
  if (const std::string file = absl::GetFlag(FLAGS_tls_ca_file); !file.empty()) {
    std::ifstream in(file);
    std::ostringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read certificates from ", file));
    }
    options.tls_root_certs = pem.str();
    options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  }
  return options;
}

// Starts the embedded server when no --server was given, then connects to whichever.
absl::StatusOr<Connected> Connect() {
  Connected c;
  std::string address = absl::GetFlag(FLAGS_server);
  std::string token;
  if (address.empty()) {
    ASSIGN_OR_RETURN(service::ServerConfig config, service::ServerConfigFromFlags());
    token = config.auth_token;  // the embedded server requires what we send
    // This process's threads (the search, gRPC's) stay off the kernel worker's core.
    service::PinAwayFrom(config.workers.cores);
    ASSIGN_OR_RETURN(c.embedded, service::LoopToolServer::Start(std::move(config)));
    address = c.embedded->address();
  } else {
    ASSIGN_OR_RETURN(token, service::AuthTokenFromFlags());
  }
  ASSIGN_OR_RETURN(c.options, ConnectionFlags(std::move(token)));
  ASSIGN_OR_RETURN(c.connection, Connection::Connect(address, c.options));
  return c;
}

// Says where the embedded server runs (nothing when there is none).
void ReportEmbedded(const Connected& c) {
  if (c.embedded == nullptr) return;
  std::fprintf(stderr, "embedded server on %s, kernel worker on cpu %d\n",
               c.embedded->address().c_str(), c.embedded->eval_cores()[0]);
}

// The action space sessions run in: --action_space, else the policy's for the policy searches,
// loop_nest for evolution (its best: bench/results/tune_bench_10s_loop_nest.md), else loop_tool
// (LoopTune's baselines, and eval's action names).
std::string ActionSpace(const Policy* policy, bool evolution = false) {
  const std::string space = absl::GetFlag(FLAGS_action_space);
  if (!space.empty()) return space;
  if (policy != nullptr) return policy->action_space();
  return evolution ? "loop_nest" : "loop_tool";
}

// Whether `path` names a regular file (an existing store): false, not an exception, where the
// file system refuses to look (a --benchmark list longer than a file name may be).
bool IsFile(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored);
}
bool Exists(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::exists(path, ignored);
}

// A benchmark named on the command line: a benchmark:// URI, a bare mmM_N_K, or a program file
// (added to the server as benchmark://user-v0/<stem>; stored under that URI and its text's hash).
absl::StatusOr<FleetBenchmark> ReadBenchmark(const std::string& arg) {
  if (IsFile(arg)) {
    std::ifstream in(arg);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", arg));
    const std::string uri = "benchmark://user-v0/" + std::filesystem::path(arg).stem().string();
    std::string key =
        absl::StrCat(uri, "#", absl::Hex(datasets::Fnv1a64(text.str()), absl::kZeroPad16));
    return FleetBenchmark{uri, text.str(), std::move(key)};
  }
  if (absl::StartsWith(arg, "benchmark://")) return FleetBenchmark{arg, "", arg};
  if (absl::StartsWith(arg, "mm")) {
    const std::string uri = absl::StrCat("benchmark://mm64_256_16_range-v0/", arg);
    return FleetBenchmark{uri, "", uri};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--benchmark '", arg, "' is neither a benchmark:// URI, an mmM_N_K name, nor a file"));
}

struct Started {
  Env env;
  FleetBenchmark benchmark;
};

// A session on --benchmark (see ReadBenchmark).
absl::StatusOr<Started> StartBenchmark(std::shared_ptr<Connection> connection,
                                       const std::string& space) {
  absl::StatusOr<FleetBenchmark> b = ReadBenchmark(absl::GetFlag(FLAGS_benchmark));
  if (!b.ok()) return b.status();
  absl::StatusOr<Env> env = b->program.empty()
                                ? Env::Start(connection, b->uri, space)
                                : Env::StartProgram(connection, b->uri, b->program, space);
  if (!env.ok()) return env.status();
  return Started{*std::move(env), *std::move(b)};
}

std::string Indent(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "  ", line, "\n");
  }
  return out;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "looptool: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// The benchmarks `tune` was asked for: --dataset's (its --split, as `lister`'s server lists
// them), or --benchmark's list.
absl::StatusOr<std::vector<FleetBenchmark>> BenchmarkList(const Connection& lister) {
  std::vector<FleetBenchmark> out;
  if (const std::string dataset = absl::GetFlag(FLAGS_dataset); !dataset.empty()) {
    absl::StatusOr<std::vector<std::string>> uris =
        lister.DatasetBenchmarks(dataset, absl::GetFlag(FLAGS_split));
    if (absl::IsNotFound(uris.status())) {  // a bad --dataset is a usage error
      return absl::InvalidArgumentError(uris.status().message());
    }
    if (!uris.ok()) return uris.status();
    for (const std::string& uri : *uris) out.push_back({uri, "", uri});
  } else {
    for (absl::string_view b :
         absl::StrSplit(absl::GetFlag(FLAGS_benchmark), ',', absl::SkipEmpty())) {
      ASSIGN_OR_RETURN(FleetBenchmark read, ReadBenchmark(std::string(b)));
      out.push_back(std::move(read));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("no benchmarks to tune");
  const size_t max = static_cast<size_t>(absl::GetFlag(FLAGS_max_benchmarks));
  if (out.size() > max) out.resize(max);
  return out;
}

// A connection to the first of `servers` that answers (to list datasets from).
absl::StatusOr<std::shared_ptr<Connection>> FirstAnswering(const std::vector<std::string>& servers,
                                                           const ConnectionOptions& options) {
  absl::Status last = absl::UnavailableError("no server given");
  for (const std::string& address : servers) {
    absl::StatusOr<std::shared_ptr<Connection>> c = Connection::Connect(address, options);
    if (c.ok()) return c;
    last = c.status();
  }
  return last;
}

// The bound's fields in a result's JSON (none without a bound).
void AddRoofline(const Roofline& bound, double gflops, json& j) {
  if (bound.gflops <= 0) return;
  j.update({{"roofline_gflops", bound.gflops},
            {"roofline_level", bound.level},
            {"memory_bound", bound.memory_bound},
            {"percent_of_roofline", bound.Percent(gflops)},
            {"roofline", json::parse(bound.json, nullptr, false)}});
}

// "roofline   12.34 GFLOPS  (memory-bound: the data fits L2); best reaches 81.2% of it"
void PrintRoofline(const Roofline& bound, double gflops, const char* label) {
  if (bound.gflops <= 0) return;
  std::printf("roofline   %8.2f GFLOPS  (%s: the data fits %s); %s reaches %.1f%% of it\n",
              bound.gflops, bound.memory_bound ? "memory-bound" : "compute-bound",
              bound.level.c_str(), label, bound.Percent(gflops));
}

json ResultJson(const TuneResult& t) {
  json j = {{"benchmark", t.benchmark}, {"server", t.server}, {"host_cpu", t.host_cpu},
            {"attempts", t.attempts}};
  if (!t.status.ok()) {
    j["error"] = std::string(t.status.message());
    j["code"] = absl::StatusCodeToString(t.status.code());
    return j;
  }
  const SearchResult& r = t.search;
  j.update({{"actions", r.actions},
            {"loop_tree", r.loop_tree},
            {"ir", r.ir},
            {"gflops", r.gflops},
            {"search_gflops", r.search_gflops},
            {"retimed", r.retimed},
            {"start_gflops", r.start_gflops},
            {"peak_gflops", r.peak_gflops},
            {"server_peak_gflops", r.server_peak_gflops},
            {"peak_measured", r.peak_beside_retimed ? "beside the re-timed kernel" : "at server start"},
            {"percent_of_peak", 100 * r.gflops / r.peak_gflops},
            {"speedup", r.start_gflops > 0 ? r.gflops / r.start_gflops : 0},
            {"seconds", r.seconds},
            {"states_evaluated", r.states_evaluated},
            {"stored_prefix", t.stored_prefix},
            {"stored", t.stored}});
  if (t.records_run > 0) j.update({{"records_run", t.records_run}, {"recorded", t.recorded}});
  AddRoofline(t.roofline, r.gflops, j);
  return j;
}

// tune over many benchmarks (--dataset, a --benchmark list, or --servers).
int TuneMany(FleetOptions options) {
  const bool as_json = absl::GetFlag(FLAGS_json);
  const int max = absl::GetFlag(FLAGS_max_benchmarks);
  if (max < 1 || max > 100000) {
    return Fail(absl::InvalidArgumentError("--max_benchmarks must be 1..100000"));
  }
  std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipEmpty());
  if (servers.size() > 64) return Fail(absl::InvalidArgumentError("--servers: 64 at most"));
  if (!servers.empty() && !absl::GetFlag(FLAGS_server).empty()) {
    return Fail(absl::InvalidArgumentError("give --server or --servers, not both"));
  }
  Connected one;  // the embedded server, or --server's; or the first of --servers to answer
  if (servers.empty()) {
    absl::StatusOr<Connected> c = Connect();
    if (!c.ok()) return Fail(c.status());
    one = *std::move(c);
    if (!as_json) ReportEmbedded(one);
    servers.push_back(one.connection->address());
  } else {
    absl::StatusOr<std::string> token = service::AuthTokenFromFlags();
    if (!token.ok()) return Fail(token.status());
    absl::StatusOr<ConnectionOptions> flags = ConnectionFlags(*std::move(token));
    if (!flags.ok()) return Fail(flags.status());
    one.options = *std::move(flags);
    absl::StatusOr<std::shared_ptr<Connection>> lister = FirstAnswering(servers, one.options);
    if (!lister.ok()) return Fail(lister.status());
    one.connection = *std::move(lister);
  }
  options.connection.auth_token = one.options.auth_token;
  options.connection.tls_root_certs = one.options.tls_root_certs;
  options.connection.tls_server_name = one.options.tls_server_name;
  if (options.tune.records != nullptr) {
    if (absl::Status s = RecordEvaluationPrograms(*options.tune.records, one.connection);
        !s.ok()) {
      return Fail(s);
    }
  }
  absl::StatusOr<std::vector<FleetBenchmark>> listed = BenchmarkList(*one.connection);
  if (!listed.ok()) return Fail(listed.status());
  const std::vector<FleetBenchmark>& benchmarks = *listed;
  absl::Mutex print_mu;
  int done = 0, failed = 0;
  std::map<std::string, int> per_server;
  options.on_result = [&](const TuneResult& t) {
    absl::MutexLock lock(&print_mu);
    ++done;
    if (t.status.ok()) {
      ++per_server[t.server];
    } else {
      ++failed;
    }
    if (as_json) {
      std::cout << ResultJson(t).dump() << std::endl;
    } else if (t.status.ok()) {
      const SearchResult& r = t.search;
      std::printf("[%d/%zu] %-52s %8.2f GFLOPS %5.1f%% of peak %5.2fx  %s%s\n", done,
                  benchmarks.size(), t.benchmark.c_str(), r.gflops,
                  100 * r.gflops / r.peak_gflops,
                  r.start_gflops > 0 ? r.gflops / r.start_gflops : 0, t.server.c_str(),
                  t.stored_prefix > 0 ? " (from the store)" : "");
      std::fflush(stdout);
    } else {
      std::printf("[%d/%zu] %-52s FAILED (%s): %s\n", done, benchmarks.size(),
                  t.benchmark.c_str(), absl::StatusCodeToString(t.status.code()).c_str(),
                  std::string(t.status.message()).c_str());
      std::fflush(stdout);
    }
  };
  const absl::Time start = absl::Now();
  TuneAcross(servers, benchmarks, options);
  std::string counts;
  for (const auto& [server, n] : per_server) absl::StrAppend(&counts, " ", server, ": ", n, ";");
  std::fprintf(stderr, "tuned %d of %zu benchmarks in %.1f s on %zu servers (%s ) %d failed\n",
               done - failed, benchmarks.size(), absl::ToDoubleSeconds(absl::Now() - start),
               servers.size(), counts.c_str(), failed);
  return failed == 0 ? 0 : 1;
}

// ---- export ----------------------------------------------------------------------------------

// Where a schedule to export came from (the store's record, when it was stored).
struct ExportSource {
  FleetBenchmark benchmark;
  std::string action_space;
  std::vector<std::string> actions;
  std::optional<StoredSchedule> stored;
  // The benchmark's other stored schedules, tried in this order where the one above no longer
  // replays (a space or program that changed since it was stored).
  std::vector<StoredSchedule> others;
  // Whether the export goes on without this benchmark where none of its schedules replays (the
  // whole store exported), rather than failing (a benchmark asked for by name).
  bool skippable = false;
  // Whether the schedules came from the schedule store (a stale one is no usage error).
  bool from_store = false;
};

// Applies the source's actions on a new session of `connection`'s server, then asks the server
// for the kernel's code, its ABI and its speed (timing verifies the kernel first). Actions that
// do not apply there: INVALID_ARGUMENT, `*not_replayed` set.
absl::StatusOr<ExportedKernel> ExportKernel(std::shared_ptr<Connection> connection,
                                            const ExportSource& source, std::string name,
                                            bool* not_replayed) {
  *not_replayed = false;
  const FleetBenchmark& b = source.benchmark;
  if (absl::StatusOr<int> space = connection->ActionSpaceIndex(source.action_space);
      !space.ok()) {
    *not_replayed = absl::IsNotFound(space.status());  // a space the server no longer has
    return space.status();
  }
  ASSIGN_OR_RETURN(Env env, b.program.empty() ? Env::Start(connection, b.uri, source.action_space)
                                              : Env::StartProgram(connection, b.uri, b.program,
                                                                  source.action_space));
  if (absl::StatusOr<StepResult> replayed = env.StepNamed(source.actions); !replayed.ok()) {
    *not_replayed = replayed.status().code() == absl::StatusCode::kInvalidArgument;
    return replayed.status();
  }
  ASSIGN_OR_RETURN(StepResult r, env.Step({}, {"flops", "peak_gflops", "loop_tree", "kernel_abi",
                                               "machine_code"}));
  ExportedKernel k;
  k.name = std::move(name);
  k.benchmark = b.uri;
  k.abi_json = r.Find("kernel_abi")->text;
  k.code = r.Find("machine_code")->text;
  k.action_space = source.action_space;
  k.actions = source.actions;
  k.loop_tree = r.Find("loop_tree")->text;
  k.gflops = r.Find("flops")->number;
  k.peak_gflops = r.Find("peak_gflops")->number;
  k.host_cpu = connection->host_cpu();
  k.server = connection->address();
  if (source.stored.has_value()) {
    k.tuned_host_cpu = source.stored->host_cpu;
    k.tuned_search = source.stored->search;
    k.tuned_gflops = source.stored->gflops;
    k.tuned_unix = source.stored->updated_unix;
  }
  return k;
}

// Exports `sources` through `connection`'s server into `directory` as --library (a line per
// kernel on stderr); the library's files and kernel count as JSON, and "skipped": the skippable
// benchmarks none of whose schedules replays, each said on stderr (FAILED_PRECONDITION where
// that leaves no kernel).
absl::StatusOr<json> ExportLibrary(std::shared_ptr<Connection> connection,
                                   const std::vector<ExportSource>& sources,
                                   const std::string& directory) {
  std::vector<ExportedKernel> kernels;
  json skipped = json::array();
  std::map<std::string, int> used;
  for (const ExportSource& source : sources) {
    std::string name = KernelName(source.benchmark.uri);
    if (const int n = ++used[name]; n > 1) absl::StrAppend(&name, "_", n);
    bool not_replayed = false;
    absl::StatusOr<ExportedKernel> k = ExportKernel(connection, source, name, &not_replayed);
    for (size_t i = 0; !k.ok() && not_replayed && i < source.others.size(); ++i) {
      const StoredSchedule& other = source.others[i];
      std::fprintf(stderr, "%s: a stored schedule does not replay (%s); trying the one tuned on "
                   "%s in %s\n", source.benchmark.uri.c_str(),
                   std::string(k.status().message()).c_str(), other.host_cpu.c_str(),
                   other.action_space.c_str());
      ExportSource next = source;
      next.action_space = other.action_space;
      next.actions = other.actions;
      next.stored = other;
      k = ExportKernel(connection, next, name, &not_replayed);
    }
    if (!k.ok() && not_replayed && source.skippable) {
      std::fprintf(stderr, "skipped %s: none of its stored schedules replays (%s)\n",
                   source.benchmark.uri.c_str(), std::string(k.status().message()).c_str());
      skipped.push_back(source.benchmark.uri);
      --used[KernelName(source.benchmark.uri)];
      continue;
    }
    if (!k.ok() && not_replayed && source.from_store) {  // stale, not a usage error
      return absl::FailedPreconditionError(
          absl::StrCat(source.benchmark.uri, ": no stored schedule of it replays (the last: ",
                       k.status().message(), ")"));
    }
    if (!k.ok()) {
      return absl::Status(k.status().code(),
                          absl::StrCat(source.benchmark.uri, ": ", k.status().message()));
    }
    std::fprintf(stderr, "%-52s %8.2f GFLOPS  %6zu bytes of %s code  -> %s\n",
                 source.benchmark.uri.c_str(), k->gflops, k->code.size(),
                 json::parse(k->abi_json)["isa"].get<std::string>().c_str(), k->name.c_str());
    kernels.push_back(*std::move(k));
  }
  if (kernels.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing to export: no stored schedule of the ", skipped.size(),
                     " benchmarks replays on this server"));
  }
  LibraryOptions options;
  options.directory = directory;
  options.name = absl::GetFlag(FLAGS_library);
  options.cc = absl::GetFlag(FLAGS_cc);
  absl::StatusOr<LibraryFiles> files = WriteKernelLibrary(kernels, options);
  if (!files.ok()) return files.status();
  return json{{"header", files->header},
              {"shared_library", files->shared_library},
              {"static_library", files->static_library},
              {"manifest", files->manifest},
              {"kernels", kernels.size()},
              {"skipped", std::move(skipped)}};
}

// The text form of ExportLibrary's result.
void PrintLibrary(const json& library) {
  const int kernels = library["kernels"].get<int>();
  std::printf("%d kernel%s exported:\n  %s\n  %s\n  %s\n  %s\n", kernels, kernels == 1 ? "" : "s",
              library["header"].get<std::string>().c_str(),
              library["shared_library"].get<std::string>().c_str(),
              library["static_library"].get<std::string>().c_str(),
              library["manifest"].get<std::string>().c_str());
  for (const json& uri : library["skipped"]) {
    std::printf("skipped %s: none of its stored schedules replays\n",
                uri.get<std::string>().c_str());
  }
}

// `looptool export`: ExportLibrary, its result printed (one JSON object with --json).
int ExportSources(std::shared_ptr<Connection> connection, const std::vector<ExportSource>& sources,
                  const std::string& directory) {
  absl::StatusOr<json> library = ExportLibrary(std::move(connection), sources, directory);
  if (!library.ok()) return Fail(library.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << library->dump() << "\n";
  } else {
    PrintLibrary(*library);
  }
  return 0;
}

// What `tune` was asked for: the search, its policy and the schedule store, from the flags.
// The policy and the store are owned here; `options` points at them.
struct TuneSetup {
  std::optional<Policy> policy;
  std::unique_ptr<ScheduleStore> store;
  std::unique_ptr<TuningRecords> records;
  TuneOptions options;
};

absl::StatusOr<std::unique_ptr<TuneSetup>> TuneSetupFromFlags() {
  auto setup = std::make_unique<TuneSetup>();
  ASSIGN_OR_RETURN(const SearchSpec search, ParseSearch(absl::GetFlag(FLAGS_search)));
  if (!absl::GetFlag(FLAGS_policy).empty()) {
    ASSIGN_OR_RETURN(setup->policy, Policy::Find(absl::GetFlag(FLAGS_policy)));
  }
  const bool uses_policy =
      search.kind == SearchSpec::Kind::kPolicy || search.kind == SearchSpec::Kind::kPolicyGuided;
  const Policy* chosen = !uses_policy               ? nullptr
                         : setup->policy.has_value() ? &*setup->policy
                                                     : &Policy::Default();
  TuneOptions& tune = setup->options;
  tune.search.search = search;
  tune.search.time_limit_seconds = absl::GetFlag(FLAGS_time_limit);
  tune.search.seed = absl::GetFlag(FLAGS_seed);
  for (const auto& [flag, name, field] :
       {std::tuple(&FLAGS_policy_candidates, "--policy_candidates",
                   &tune.search.policy_candidates),
        std::tuple(&FLAGS_policy_timed, "--policy_timed", &tune.search.policy_timed),
        std::tuple(&FLAGS_guided_candidates, "--guided_candidates",
                   &tune.search.guided_candidates),
        std::tuple(&FLAGS_guided_timed, "--guided_timed", &tune.search.guided_timed)}) {
    const int n = absl::GetFlag(*flag);
    if (n < 1 || n > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be in 1..1024, not ", n));
    }
    *field = n;
  }
  if (const double t = absl::GetFlag(FLAGS_policy_seconds); !(t >= 0.001 && t <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--policy_seconds must be in 0.001..3600, not ", t));
  }
  tune.search.policy_seconds = absl::GetFlag(FLAGS_policy_seconds);
  if (const double s = absl::GetFlag(FLAGS_guided_neighbor_share); !(s >= 0 && s <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--guided_neighbor_share must be in 0..0.5, not ", s));
  }
  tune.search.guided_neighbor_share = absl::GetFlag(FLAGS_guided_neighbor_share);
  if (const double m = absl::GetFlag(FLAGS_pass_predicted_slower); !(m >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pass_predicted_slower must be 0 or more, not ", m));
  }
  tune.search.pass_predicted_slower = absl::GetFlag(FLAGS_pass_predicted_slower);
  if (setup->policy.has_value()) tune.search.policy = &*setup->policy;
  tune.loop_set_by_isa = absl::GetFlag(FLAGS_policy) == "loop_set" &&
                        (uses_policy || search.kind == SearchSpec::Kind::kEvolution);
  tune.action_space = ActionSpace(chosen, search.kind == SearchSpec::Kind::kEvolution);
  if (const std::string path = absl::GetFlag(FLAGS_store); !path.empty()) {
    ASSIGN_OR_RETURN(setup->store, ScheduleStore::Open(path));
    tune.store = setup->store.get();
  }
  if (const std::string path = absl::GetFlag(FLAGS_records); !path.empty()) {
    ASSIGN_OR_RETURN(setup->records, TuningRecords::Open(path));
    tune.records = setup->records.get();
  }
  return setup;
}

// One benchmark's result, as text (or one JSON object with --json).
// `exported`: what tune --export-dir wrote (ExportLibrary's result), null when nothing; with
// --json it is the object's "export" member (one JSON object in all), else printed last.
void PrintTuneResult(const std::string& uri, const TuneOptions& tune, const TuneResult& t,
                     const ScheduleStore* store, const json& exported) {
  const SearchResult& r = t.search;
  const std::string search_name = tune.search.search.Name();
  if (absl::GetFlag(FLAGS_json)) {
    json j = ResultJson(t);
    j["benchmark"] = uri;
    j["search"] = search_name;
    j["action_space"] = tune.action_space;
    if (!exported.is_null()) j["export"] = exported;
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("benchmark  %s\n", uri.c_str());
  std::printf("search     %s in %s: %lld states evaluated in %.1f s\n", search_name.c_str(),
              tune.action_space.c_str(), static_cast<long long>(r.states_evaluated), r.seconds);
  const char* start_label = t.stored_prefix > 0 ? "stored" : "start";
  if (r.start_gflops > 0) {
    std::printf("%-10s %8.2f GFLOPS  %5.1f%% of peak\n", start_label, r.start_gflops,
                100 * r.start_gflops / r.peak_gflops);
    std::printf("best       %8.2f GFLOPS  %5.1f%% of peak  %.2fx the %s\n", r.gflops,
                100 * r.gflops / r.peak_gflops, r.gflops / r.start_gflops,
                t.stored_prefix > 0 ? "stored schedule" : "start");
  } else {  // policy: the start state is not timed
    std::printf("best       %8.2f GFLOPS  %5.1f%% of peak\n", r.gflops,
                100 * r.gflops / r.peak_gflops);
  }
  if (r.retimed) {
    std::printf("re-timed   the best %d states at the end; the search had measured %.2f GFLOPS\n",
                tune.search.retime_top, r.search_gflops);
  }
  if (r.peak_beside_retimed) {
    std::printf("peak       %8.2f GFLOPS  (FMA peak of the core, measured right after the re-timed "
                "best: %s; %.2f at the server's start)\n",
                r.peak_gflops, t.host_cpu.c_str(), r.server_peak_gflops);
  } else {
    std::printf("peak       %8.2f GFLOPS  (measured FMA peak of one core: %s)\n", r.peak_gflops,
                t.host_cpu.c_str());
  }
  PrintRoofline(t.roofline, r.gflops, "best");
  std::printf("actions    %s\n",
              r.actions.empty() ? "(none)" : absl::StrJoin(r.actions, ", ").c_str());
  std::printf("loop tree\n%s", Indent(r.loop_tree).c_str());
  if (t.records_run > 0) {
    std::printf("records    %lld kernels recorded as run %lld of %s\n",
                static_cast<long long>(t.recorded), static_cast<long long>(t.records_run),
                absl::GetFlag(FLAGS_records).c_str());
  }
  if (store != nullptr) {
    std::printf("store      %s %s\n",
                t.stored ? "kept in" : "not kept (the stored one is as fast):",
                store->path().c_str());
  }
  if (!exported.is_null()) PrintLibrary(exported);
}

int Tune() {
  absl::StatusOr<std::unique_ptr<TuneSetup>> setup = TuneSetupFromFlags();
  if (!setup.ok()) return Fail(setup.status());
  TuneOptions& tune = (*setup)->options;
  const std::string arg = absl::GetFlag(FLAGS_benchmark);
  const bool many = !absl::GetFlag(FLAGS_dataset).empty() ||
                    !absl::GetFlag(FLAGS_servers).empty() ||
                    (absl::StrContains(arg, ',') && !IsFile(arg));
  if (!absl::GetFlag(FLAGS_export_dir).empty()) {  // before the tuning time is spent
    if (absl::Status s = CheckLibraryName(absl::GetFlag(FLAGS_library)); !s.ok()) return Fail(s);
  }
  if (many) {
    if (!absl::GetFlag(FLAGS_export_dir).empty()) {
      return Fail(absl::InvalidArgumentError(
          "tune --export-dir exports one benchmark's kernel; to export many, tune them with "
          "--store=FILE, then `looptool export --store=FILE --output=DIR`"));
    }
    FleetOptions options;
    options.tune = tune;
    return TuneMany(std::move(options));
  }

  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  if (!absl::GetFlag(FLAGS_json)) ReportEmbedded(*c);
  if (tune.records != nullptr) {
    if (absl::Status s = RecordEvaluationPrograms(*tune.records, c->connection); !s.ok()) {
      return Fail(s);
    }
  }
  absl::StatusOr<Started> started = StartBenchmark(c->connection, tune.action_space);
  if (!started.ok()) return Fail(started.status());
  tune.store_key = started->benchmark.store_key;

  const bool tty = isatty(STDERR_FILENO);
  double last_print = -1;
  const std::string search_name = tune.search.search.Name();
  tune.search.on_progress = [&](const SearchProgress& p) {
    if (p.elapsed_seconds - last_print < (tty ? 0.1 : 2.0)) return;
    last_print = p.elapsed_seconds;
    std::fprintf(stderr, "%s%s: best %.1f GFLOPS (%.1f%% of peak) | %lld states | %.1f s%s",
                 tty ? "\r" : "", search_name.c_str(), p.best_gflops,
                 100 * p.best_gflops / p.peak_gflops,
                 static_cast<long long>(p.states_evaluated), p.elapsed_seconds,
                 tty ? "   " : "\n");
  };
  absl::StatusOr<TuneResult> t = TuneOne(started->env, *c->connection, tune);
  if (tty) std::fprintf(stderr, "\n");
  if (!t.ok()) return Fail(t.status());
  t->attempts = 1;
  absl::StatusOr<json> exported = json();  // null: nothing asked for
  if (const std::string dir = absl::GetFlag(FLAGS_export_dir); !dir.empty()) {
    ExportSource source{started->benchmark, tune.action_space, t->search.actions, std::nullopt};
    source.stored = StoredSchedule{};
    source.stored->host_cpu = t->host_cpu;
    source.stored->search = search_name;
    source.stored->gflops = t->search.gflops;
    source.stored->updated_unix = absl::ToUnixSeconds(absl::Now());
    exported = ExportLibrary(c->connection, {source}, dir);
  }
  // The tuning result stands (and is printed) when the export fails; the exit status says so.
  PrintTuneResult(started->benchmark.uri, tune, *t, (*setup)->store.get(),
                  exported.ok() ? *exported : json());
  if (!exported.ok()) return Fail(exported.status());
  return 0;
}

int Eval() {
  const bool as_json = absl::GetFlag(FLAGS_json);
  const double eval_seconds = absl::GetFlag(FLAGS_eval_seconds);
  if (!(eval_seconds >= 0 && eval_seconds <= 60)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--eval_seconds must be 0..60, not ", eval_seconds)));
  }
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  if (!as_json) ReportEmbedded(*c);
  absl::StatusOr<Started> started = StartBenchmark(c->connection, ActionSpace(nullptr));
  if (!started.ok()) return Fail(started.status());
  const std::string& uri = started->benchmark.uri;
  Env& env = started->env;
  absl::StatusOr<StepResult> start = env.Step({}, {"flops", "peak_gflops"});
  if (!start.ok()) return Fail(start.status());
  const std::vector<std::string> actions =
      absl::StrSplit(absl::GetFlag(FLAGS_actions), ',', absl::SkipEmpty());
  std::vector<bool> effect;
  for (const std::string& a : actions) {
    absl::StatusOr<StepResult> r = env.StepNamed({a});
    if (!r.ok()) return Fail(r.status());
    effect.push_back(!r->action_had_no_effect);
  }
  absl::StatusOr<StepResult> end = env.Step({}, {"loop_tree", "flops", "ir"});
  if (!end.ok()) return Fail(end.status());
  // Re-timed for --eval_seconds (at least once when > 0): a slow spell of the host lasts a
  // fraction of a second, and one 10 ms timing of a large kernel is a few runs.
  Retiming best_retiming;
  int retimings = 0;
  const absl::Time retime_start = absl::Now();
  while (eval_seconds > 0 &&
         (retimings == 0 ||
          absl::ToDoubleSeconds(absl::Now() - retime_start) < eval_seconds)) {
    absl::StatusOr<Retiming> r = env.Remeasure();
    // A server without looptool.remeasure (an older one): its one measurement counts.
    if (!r.ok() && r.status().code() == absl::StatusCode::kUnimplemented) break;
    if (!r.ok()) return Fail(r.status());
    ++retimings;
    if (r->gflops > best_retiming.gflops) best_retiming = *r;
  }
  const double retime_seconds = absl::ToDoubleSeconds(absl::Now() - retime_start);
  // The code generator's plan; servers that do not serve it (older ones) print none.
  absl::StatusOr<Value> plan = env.Observe("kernel_plan");
  // Step returns every observation it was asked for, so these are never null.
  const double g0 = start->Find("flops")->number;
  const double measured = end->Find("flops")->number;
  const double g = retimings > 0 ? best_retiming.gflops : measured;
  // A fraction of peak compares numbers taken at the same clock: the peak measured beside the
  // fastest re-timing where the server measures one.
  const double start_peak = start->Find("peak_gflops")->number;
  const double peak = best_retiming.peak_gflops > 0 ? best_retiming.peak_gflops : start_peak;
  // The start is measured once: the speedup compares it with the result's own first
  // measurement, not with the fastest of its re-timings.
  const double speedup = g0 > 0 ? measured / g0 : 0;
  const std::string& loop_tree = end->Find("loop_tree")->text;
  const std::string kernel_plan = plan.ok() ? plan->text : "";
  const Roofline bound = ObserveRoofline(env);
  if (as_json) {
    json j = {{"benchmark", uri}, {"actions", actions}, {"had_effect", effect},
              {"loop_tree", loop_tree}, {"ir", end->Find("ir")->text},
              {"kernel_plan", kernel_plan}, {"gflops", g}, {"start_gflops", g0},
              {"measured_gflops", measured}, {"retimings", retimings},
              {"peak_gflops", peak}, {"speedup", speedup}};
    AddRoofline(bound, g, j);
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("benchmark  %s\n", uri.c_str());
  for (size_t i = 0; i < actions.size(); ++i) {
    std::printf("  %-10s%s\n", actions[i].c_str(), effect[i] ? "" : " (no effect)");
  }
  std::printf("start      %8.2f GFLOPS  %5.1f%% of peak\n", g0, 100 * g0 / start_peak);
  std::printf("result     %8.2f GFLOPS  %5.1f%% of peak  %.2fx the start (first measurements)\n",
              g, 100 * g / peak, speedup);
  if (retimings > 0) {
    std::printf("re-timed   %d times in %.1f s, the fastest counts; its first measurement read "
                "%.2f GFLOPS\n",
                retimings, retime_seconds, measured);
  }
  PrintRoofline(bound, g, "result");
  std::printf("loop tree\n%s", Indent(loop_tree).c_str());
  if (!kernel_plan.empty()) std::printf("kernel plan\n%s", Indent(kernel_plan).c_str());
  return 0;
}

// The FMA peak of one core, measured now: the embedded server measures it as it starts (the best
// of a few spaced rounds on its kernel worker's core, --eval_cores, with --isa's code); a
// --server reports the peak it measured when it started. A benchmark that times kernels itself
// divides by a peak taken beside its timings (layer_bench: after each layer's), so that both
// were measured at the same clock.
int Peak() {
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  absl::StatusOr<Started> started = StartBenchmark(c->connection, ActionSpace(nullptr));
  if (!started.ok()) return Fail(started.status());
  absl::StatusOr<StepResult> r = started->env.Step({}, {"peak_gflops"});
  if (!r.ok()) return Fail(r.status());
  const double peak = r->Find("peak_gflops")->number;
  const int cpu = c->embedded != nullptr ? c->embedded->eval_cores()[0] : -1;
  const char* measured = c->embedded != nullptr ? "now" : "at server start";
  if (absl::GetFlag(FLAGS_json)) {
    json j = {{"peak_gflops", peak}, {"host_cpu", c->connection->host_cpu()},
              {"measured", measured}};
    if (cpu >= 0) j["cpu"] = cpu;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("peak %8.2f GFLOPS  (FMA peak of one core, %s; measured %s%s)\n", peak,
              c->connection->host_cpu().c_str(), measured,
              cpu >= 0 ? absl::StrCat(" on cpu ", cpu).c_str() : "");
  return 0;
}

// Lists the server's datasets, or with --dataset its benchmarks (the server's lists and split).
int Benchmarks() {
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  const std::string dataset = absl::GetFlag(FLAGS_dataset);
  if (dataset.empty()) {
    absl::StatusOr<std::vector<DatasetInfo>> all = c->connection->Datasets();
    if (!all.ok()) return Fail(all.status());
    std::printf("%-22s %6s %6s  %s\n", "dataset", "size", "test", "description");
    for (const DatasetInfo& d : *all) {
      std::printf("%-22s %6lld %6lld  %s\n", d.name.c_str(), static_cast<long long>(d.size),
                  static_cast<long long>(d.test_size), d.description.c_str());
    }
    std::printf("\nURIs: benchmark://<dataset>/<name>; `looptool benchmarks --dataset=NAME` lists "
                "them ([test]: in the test split).\n");
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> uris = c->connection->DatasetBenchmarks(dataset, "all");
  absl::StatusOr<std::vector<std::string>> test =
      c->connection->DatasetBenchmarks(dataset, "test");
  if (!uris.ok()) return Fail(absl::InvalidArgumentError(uris.status().message()));
  if (!test.ok()) return Fail(test.status());
  const std::set<std::string> in_test(test->begin(), test->end());
  for (const std::string& uri : *uris) {
    std::printf("%s%s\n", uri.c_str(), in_test.count(uri) ? "  [test]" : "");
  }
  return 0;
}

// Lists (or, with --json, exports as JSON lines) the schedules of --store.
int Schedules() {
  const std::string path = absl::GetFlag(FLAGS_store);
  if (path.empty()) return Fail(absl::InvalidArgumentError("schedules needs --store=FILE"));
  if (!Exists(path)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("no schedule store at ", path)));
  }
  absl::StatusOr<std::unique_ptr<ScheduleStore>> store = ScheduleStore::Open(path);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<std::vector<StoredSchedule>> all = (*store)->List(absl::GetFlag(FLAGS_host));
  if (!all.ok()) return Fail(all.status());
  for (const StoredSchedule& s : *all) {
    if (absl::GetFlag(FLAGS_json)) {
      json j = {{"benchmark", s.benchmark},   {"host_cpu", s.host_cpu},
                {"action_space", s.action_space}, {"actions", s.actions},
                {"loop_tree", s.loop_tree},   {"gflops", s.gflops},
                {"peak_gflops", s.peak_gflops}, {"search", s.search},
                {"server", s.server},         {"seconds", s.seconds},
                {"updated_unix", s.updated_unix}};
      std::cout << j.dump() << "\n";
    } else {
      std::printf("%-56s %8.2f GFLOPS %5.1f%% of peak  %-10s %2zu actions  %s\n",
                  s.benchmark.c_str(), s.gflops, 100 * s.gflops / s.peak_gflops,
                  s.action_space.c_str(), s.actions.size(), s.host_cpu.c_str());
    }
  }
  if (!absl::GetFlag(FLAGS_json)) {
    std::fprintf(stderr, "%zu schedules in %s\n", all->size(), path.c_str());
  }
  return 0;
}

// export: --store's schedules (those of --benchmark's list, or all whose program the server
// knows; per benchmark the fastest tuned on the server's CPU), or --benchmark with --actions, or
// a --benchmark list at their start schedules.
int Export() {
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) return Fail(absl::InvalidArgumentError("export needs --output=DIR"));
  if (absl::Status s = CheckLibraryName(absl::GetFlag(FLAGS_library)); !s.ok()) return Fail(s);
  std::vector<ExportSource> sources;
  const std::string store_path = absl::GetFlag(FLAGS_store);
  const std::string benchmark_flag = absl::GetFlag(FLAGS_benchmark);
  std::unique_ptr<ScheduleStore> store;
  if (!store_path.empty()) {
    if (!absl::GetFlag(FLAGS_actions).empty()) {
      return Fail(absl::InvalidArgumentError("give --store or --actions, not both"));
    }
    if (!Exists(store_path)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("no schedule store at ", store_path)));
    }
    absl::StatusOr<std::unique_ptr<ScheduleStore>> opened = ScheduleStore::Open(store_path);
    if (!opened.ok()) return Fail(opened.status());
    store = *std::move(opened);
    absl::StatusOr<std::vector<StoredSchedule>> all = store->List(absl::GetFlag(FLAGS_host));
    if (!all.ok()) return Fail(all.status());
    // The benchmarks asked for (by store key), when --benchmark was given explicitly.
    std::map<std::string, FleetBenchmark> wanted;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag("benchmark");
    const bool explicit_list = flag->CurrentValue() != flag->DefaultValue();
    if (explicit_list) {
      for (absl::string_view b : absl::StrSplit(benchmark_flag, ',', absl::SkipEmpty())) {
        absl::StatusOr<FleetBenchmark> read = ReadBenchmark(std::string(b));
        if (!read.ok()) return Fail(read.status());
        wanted[read->store_key] = *std::move(read);
      }
    }
    // Every stored schedule of each benchmark to export (the store keeps one per host CPU and
    // action space); which one is exported is chosen once the server's host is known.
    std::vector<std::pair<FleetBenchmark, std::vector<StoredSchedule>>> candidates;
    std::map<std::string, size_t> index;  // store key -> candidates
    for (const StoredSchedule& s : *all) {
      FleetBenchmark b{s.benchmark, "", s.benchmark};
      if (explicit_list) {
        auto it = wanted.find(s.benchmark);
        if (it == wanted.end()) continue;
        b = it->second;
      } else if (absl::StrContains(s.benchmark, '#')) {
        std::fprintf(stderr, "skipped %s: a program from a file; name the file with --benchmark\n",
                     s.benchmark.c_str());
        continue;
      }
      auto [it, added] = index.try_emplace(s.benchmark, candidates.size());
      if (added) candidates.push_back({std::move(b), {}});
      candidates[it->second].second.push_back(s);
    }
    for (const auto& [key, b] : wanted) {
      if (!index.count(key)) {
        return Fail(absl::NotFoundError(absl::StrCat(store_path, " has no schedule of ", b.uri,
                                                     absl::GetFlag(FLAGS_host).empty()
                                                         ? ""
                                                         : " on that --host")));
      }
    }
    if (candidates.empty()) {
      return Fail(absl::NotFoundError(absl::StrCat("no schedules to export in ", store_path)));
    }
    absl::StatusOr<Connected> c = Connect();
    if (!c.ok()) return Fail(c.status());
    ReportEmbedded(*c);
    // Per benchmark: the fastest schedule tuned on this server's CPU; else (none was) the first
    // listed, said so: speeds measured on other CPUs do not compare. Where it no longer replays,
    // the next: this CPU's by speed, then the others as listed.
    const std::string host = c->connection->host_cpu();
    for (auto& [b, stored] : candidates) {
      std::stable_sort(stored.begin(), stored.end(),
                       [&host](const StoredSchedule& x, const StoredSchedule& y) {
                         const bool xh = x.host_cpu == host, yh = y.host_cpu == host;
                         if (xh != yh) return xh;
                         return xh && x.gflops > y.gflops;
                       });
      const StoredSchedule& chosen = stored.front();
      if (chosen.host_cpu != host) {
        std::fprintf(stderr, "%s: no schedule tuned on %s; exporting the one tuned on %s\n",
                     b.uri.c_str(), host.c_str(), chosen.host_cpu.c_str());
      }
      sources.push_back({b, chosen.action_space, chosen.actions, chosen,
                         std::vector<StoredSchedule>(stored.begin() + 1, stored.end()),
                         !explicit_list, true});
    }
    return ExportSources(c->connection, sources, output);
  } else {
    const std::vector<std::string> actions =
        absl::StrSplit(absl::GetFlag(FLAGS_actions), ',', absl::SkipEmpty());
    std::vector<std::string> list = absl::StrSplit(benchmark_flag, ',', absl::SkipEmpty());
    if (IsFile(benchmark_flag)) list = {benchmark_flag};
    if (list.size() > 1 && !actions.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--actions applies to one --benchmark; several are exported at their start schedules"));
    }
    for (const std::string& arg : list) {
      absl::StatusOr<FleetBenchmark> b = ReadBenchmark(arg);
      if (!b.ok()) return Fail(b.status());
      sources.push_back(
          {*std::move(b), ActionSpace(nullptr), actions, std::nullopt, {}, false, false});
    }
    if (sources.empty()) return Fail(absl::InvalidArgumentError("no benchmarks to export"));
  }
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  ReportEmbedded(*c);
  return ExportSources(c->connection, sources, output);
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "looptool tune|eval|benchmarks|schedules|export|peak [flags]: tune loop nests with LoopTool");
  std::vector<std::string> normalized = NormalizeFlags(argc, argv);
  std::vector<char*> args;
  for (std::string& s : normalized) args.push_back(s.data());
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  const std::string command = rest.size() > 1 ? rest[1] : "";
  if (rest.size() > 2) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unexpected argument '", rest[2], "'")));
  }
  if (command == "tune") return Tune();
  if (command == "eval") return Eval();
  if (command == "benchmarks") return Benchmarks();
  if (command == "schedules") return Schedules();
  if (command == "export") return Export();
  if (command == "peak") return Peak();
  std::fprintf(stderr,
               "usage: looptool tune --benchmark=URI|FILE [--search=ALGO] [--time-limit=S] "
               "[--server=HOST:PORT] [--json]\n"
               "       looptool eval --benchmark=URI|FILE --actions=a,b,c [--eval_seconds=1] [--json]\n"
               "       looptool tune --dataset=NAME [--split=test] | --benchmark=URI,URI,... "
               "[--servers=HOST:PORT,...] [--store=FILE]\n"
               "       looptool benchmarks [--dataset=NAME]\n"
               "       looptool schedules --store=FILE [--host=TEXT] [--json]\n"
               "       looptool export --output=DIR [--library=NAME] (--store=FILE [--host=TEXT] "
               "[--benchmark=...] | --benchmark=URI|FILE [--actions=a,b,c])\n"
               "       looptool peak [--isa=ISA] [--eval_cores=N] [--json]: one core's FMA peak, "
               "measured now (with --server: that server's, measured at its start)\n"
               "search algorithms: %s\n",
               absl::StrJoin(SearchAlgorithms(), ", ").c_str());
  return command.empty() || command == "help" ? 0 : 2;
}

}  // namespace
}  // namespace looptool::client

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  return looptool::client::Main(argc, argv);
}
