// looptool: the command line of LoopTool.
//
//   looptool tune --benchmark=URI|FILE [--search=evolution] [--policy=FILE] [--time-limit=10]
//                 [--server=HOST:PORT] [--json]
//   looptool eval --benchmark=URI|FILE --actions=split_4,down,... [--server=...] [--json]
//   looptool benchmarks [--dataset=NAME]
//
// Without --server it starts an embedded LoopTool server on 127.0.0.1 (its kernel worker pinned
// to the last CPU) and talks to it over gRPC like any other client. Flags may be spelled with
// dashes or underscores, as --flag=value or --flag value.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "backend/timing/worker_main.h"
#include "client/cpp/env.h"
#include "client/cpp/search.h"
#include "datasets/registry.h"
#include "nlohmann/json.hpp"
#include "service/server.h"

ABSL_FLAG(std::string, benchmark, "benchmark://mm64_256_16_range-v0/mm112_208_256",
          "a benchmark URI, a bare mmM_N_K, or a file holding a program in the loop-nest language");
ABSL_FLAG(std::string, search, "evolution",
          "greedy1, greedy2, beam2dfs, beam4dfs, beam2bfs, beam4bfs, random, evolution, policy "
          "(a trained policy's episode, only its final state timed) or policy_guided");
ABSL_FLAG(std::string, policy, "",
          "policy and policy_guided: a policy file from `python3 -m looptool.rl.train` "
          "(default: the one built in, datasets/policies/looptune_dqn.json)");
ABSL_FLAG(double, time_limit, 10, "seconds the search may take");
ABSL_FLAG(std::string, server, "", "HOST:PORT of a running server (default: start one here)");
ABSL_FLAG(bool, json, false, "print one JSON object instead of text");
ABSL_FLAG(std::string, actions, "", "eval: comma-separated action names to apply");
ABSL_FLAG(std::string, action_space, "",
          "loop_tool or loop_tune (default: loop_tool, or the policy's for the policy searches)");
ABSL_FLAG(std::string, dataset, "", "benchmarks: list this dataset's benchmarks");
ABSL_FLAG(uint64_t, seed, 0, "seed of the random and evolution searches");
ABSL_FLAG(double, timing_budget_ms, 10,
          "embedded server: timing budget per new schedule (the fastest run within it counts; "
          "with --timing=adaptive its cap)");
ABSL_FLAG(std::string, timing, "adaptive",
          "embedded server: adaptive (runs stop once their minimum settles or is clearly slower "
          "than the best; candidates timed again with the whole budget) or fixed");
ABSL_FLAG(std::string, eval_cores, "", "embedded server: comma-separated CPUs for kernel workers");
ABSL_FLAG(std::string, auth_token_file, "",
          "--server: a file whose first line is the server's shared token");
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
};

// Starts the embedded server when no --server was given, then connects to whichever.
absl::StatusOr<Connected> Connect() {
  Connected c;
  std::string address = absl::GetFlag(FLAGS_server);
  if (address.empty()) {
    service::ServerConfig config;
    config.workers.budget_ms = absl::GetFlag(FLAGS_timing_budget_ms);
    const std::string timing = absl::GetFlag(FLAGS_timing);
    if (timing != "adaptive" && timing != "fixed") {
      return absl::InvalidArgumentError("--timing must be adaptive or fixed");
    }
    config.workers.adaptive_timing = timing == "adaptive";
    for (absl::string_view cpu :
         absl::StrSplit(absl::GetFlag(FLAGS_eval_cores), ',', absl::SkipEmpty())) {
      int n = 0;
      if (!absl::SimpleAtoi(cpu, &n)) return absl::InvalidArgumentError("bad --eval_cores");
      config.workers.cores.push_back(n);
    }
    // This process's threads (the search, gRPC's) stay off the kernel worker's core.
    if (config.workers.cores.empty()) config.workers.cores = service::DefaultEvalCores();
    service::PinAwayFrom(config.workers.cores);
    absl::StatusOr<std::unique_ptr<service::LoopToolServer>> server =
        service::LoopToolServer::Start(config);
    if (!server.ok()) return server.status();
    c.embedded = *std::move(server);
    address = c.embedded->address();
  }
  ConnectionOptions options;
  if (const std::string file = absl::GetFlag(FLAGS_auth_token_file); !file.empty()) {
    std::ifstream in(file);
    std::getline(in, options.auth_token);
    if (!in || options.auth_token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read a token from ", file));
    }
  }
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
  absl::StatusOr<std::shared_ptr<Connection>> connection =
      Connection::Connect(address, std::move(options));
  if (!connection.ok()) return connection.status();
  c.connection = *std::move(connection);
  return c;
}

// Says where the embedded server runs (nothing when there is none).
void ReportEmbedded(const Connected& c) {
  if (c.embedded == nullptr) return;
  std::fprintf(stderr, "embedded server on %s, kernel worker on cpu %d\n",
               c.embedded->address().c_str(), c.embedded->eval_cores()[0]);
}

struct Started {
  Env env;
  std::string uri;  // the benchmark the session runs
};

// A session on --benchmark: a URI, a bare mmM_N_K, or a program file (added to the server as
// benchmark://user-v0/<stem>).
// The session's action space is --action_space, or the policy's for the policy searches when
// --action_space was not given.
absl::StatusOr<Started> StartBenchmark(std::shared_ptr<Connection> connection,
                                       const Policy* policy = nullptr) {
  const std::string arg = absl::GetFlag(FLAGS_benchmark);
  std::string space = absl::GetFlag(FLAGS_action_space);
  if (policy != nullptr && absl::GetFlag(FLAGS_action_space).empty()) {
    space = policy->action_space();
  } else if (space.empty()) {
    space = "loop_tool";
  }
  std::string uri;
  absl::StatusOr<Env> env;
  if (absl::StartsWith(arg, "benchmark://")) {
    uri = arg;
    env = Env::Start(connection, uri, space);
  } else if (std::filesystem::is_regular_file(arg)) {
    std::ifstream in(arg);
    std::stringstream text;
    text << in.rdbuf();
    uri = "benchmark://user-v0/" + std::filesystem::path(arg).stem().string();
    env = Env::StartProgram(connection, uri, text.str(), space);
  } else if (absl::StartsWith(arg, "mm")) {
    uri = datasets::Uri("mm64_256_16_range-v0", arg);
    env = Env::Start(connection, uri, space);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--benchmark '", arg, "' is neither a benchmark:// URI, an mmM_N_K name, nor a file"));
  }
  if (!env.ok()) return env.status();
  return Started{*std::move(env), std::move(uri)};
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

int Tune() {
  const bool as_json = absl::GetFlag(FLAGS_json);
  absl::StatusOr<SearchSpec> search = ParseSearch(absl::GetFlag(FLAGS_search));
  if (!search.ok()) return Fail(search.status());
  const std::string search_name = search->Name();
  std::optional<Policy> policy;
  if (!absl::GetFlag(FLAGS_policy).empty()) {
    absl::StatusOr<Policy> loaded = Policy::Load(absl::GetFlag(FLAGS_policy));
    if (!loaded.ok()) return Fail(loaded.status());
    policy = *std::move(loaded);
  }
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  if (!as_json) ReportEmbedded(*c);
  const bool uses_policy =
      search->kind == SearchSpec::Kind::kPolicy || search->kind == SearchSpec::Kind::kPolicyGuided;
  const Policy* chosen =
      !uses_policy ? nullptr : policy.has_value() ? &*policy : &Policy::Default();
  absl::StatusOr<Started> started = StartBenchmark(c->connection, chosen);
  if (!started.ok()) return Fail(started.status());
  const std::string& uri = started->uri;

  SearchOptions options;
  options.search = *search;
  options.time_limit_seconds = absl::GetFlag(FLAGS_time_limit);
  options.seed = absl::GetFlag(FLAGS_seed);
  if (policy.has_value()) options.policy = &*policy;
  const bool tty = isatty(STDERR_FILENO);
  double last_print = -1;
  options.on_progress = [&](const SearchProgress& p) {
    if (p.elapsed_seconds - last_print < (tty ? 0.1 : 2.0)) return;
    last_print = p.elapsed_seconds;
    std::fprintf(stderr, "%s%s: best %.1f GFLOPS (%.1f%% of peak) | %lld states | %.1f s%s",
                 tty ? "\r" : "", search_name.c_str(), p.best_gflops,
                 100 * p.best_gflops / p.peak_gflops,
                 static_cast<long long>(p.states_evaluated), p.elapsed_seconds,
                 tty ? "   " : "\n");
  };
  absl::StatusOr<SearchResult> r = Search(started->env, options);
  if (tty) std::fprintf(stderr, "\n");
  if (!r.ok()) return Fail(r.status());
  const double speedup = r->start_gflops > 0 ? r->gflops / r->start_gflops : 0;
  if (as_json) {
    json j = {{"benchmark", uri},
              {"search", search_name},
              {"actions", r->actions},
              {"loop_tree", r->loop_tree},
              {"ir", r->ir},
              {"gflops", r->gflops},
              {"start_gflops", r->start_gflops},
              {"peak_gflops", r->peak_gflops},
              {"percent_of_peak", 100 * r->gflops / r->peak_gflops},
              {"speedup", speedup},
              {"seconds", r->seconds},
              {"states_evaluated", r->states_evaluated}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("benchmark  %s\n", uri.c_str());
  std::printf("search     %s: %lld states evaluated in %.1f s\n", search_name.c_str(),
              static_cast<long long>(r->states_evaluated), r->seconds);
  if (r->start_gflops > 0) {
    std::printf("start      %8.2f GFLOPS  %5.1f%% of peak\n", r->start_gflops,
                100 * r->start_gflops / r->peak_gflops);
    std::printf("best       %8.2f GFLOPS  %5.1f%% of peak  %.2fx the start\n", r->gflops,
                100 * r->gflops / r->peak_gflops, speedup);
  } else {  // policy: the start state is not timed
    std::printf("best       %8.2f GFLOPS  %5.1f%% of peak\n", r->gflops,
                100 * r->gflops / r->peak_gflops);
  }
  std::printf("peak       %8.2f GFLOPS  (measured FMA peak of one core)\n", r->peak_gflops);
  std::printf("actions    %s\n", r->actions.empty() ? "(none)" : absl::StrJoin(r->actions, ", ").c_str());
  std::printf("loop tree\n%s", Indent(r->loop_tree).c_str());
  return 0;
}

int Eval() {
  const bool as_json = absl::GetFlag(FLAGS_json);
  absl::StatusOr<Connected> c = Connect();
  if (!c.ok()) return Fail(c.status());
  if (!as_json) ReportEmbedded(*c);
  absl::StatusOr<Started> started = StartBenchmark(c->connection);
  if (!started.ok()) return Fail(started.status());
  const std::string& uri = started->uri;
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
  // Step returns every observation it was asked for, so these are never null.
  const double g0 = start->Find("flops")->number, peak = start->Find("peak_gflops")->number;
  const double g = end->Find("flops")->number;
  const std::string& loop_tree = end->Find("loop_tree")->text;
  if (as_json) {
    json j = {{"benchmark", uri}, {"actions", actions}, {"had_effect", effect},
              {"loop_tree", loop_tree}, {"ir", end->Find("ir")->text},
              {"gflops", g}, {"start_gflops", g0}, {"peak_gflops", peak},
              {"speedup", g0 > 0 ? g / g0 : 0}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("benchmark  %s\n", uri.c_str());
  for (size_t i = 0; i < actions.size(); ++i) {
    std::printf("  %-10s%s\n", actions[i].c_str(), effect[i] ? "" : " (no effect)");
  }
  std::printf("start      %8.2f GFLOPS  %5.1f%% of peak\n", g0, 100 * g0 / peak);
  std::printf("result     %8.2f GFLOPS  %5.1f%% of peak  %.2fx the start\n", g, 100 * g / peak,
              g0 > 0 ? g / g0 : 0);
  std::printf("loop tree\n%s", Indent(loop_tree).c_str());
  return 0;
}

int Benchmarks() {
  const std::string dataset = absl::GetFlag(FLAGS_dataset);
  if (dataset.empty()) {
    std::printf("%-22s %6s %6s  %s\n", "dataset", "size", "test", "description");
    for (const datasets::DatasetInfo& d : datasets::Datasets()) {
      int test = 0;
      for (const std::string& n : datasets::BenchmarkNames(d.name)) {
        test += datasets::InTestSplit(d.name, n);
      }
      std::printf("%-22s %6lld %6d  %s\n", d.name.c_str(), static_cast<long long>(d.size), test,
                  d.description.c_str());
    }
    std::printf("\nURIs: benchmark://<dataset>/<name>; `looptool benchmarks --dataset=NAME` lists "
                "names.\n");
    return 0;
  }
  const std::vector<std::string> names = datasets::BenchmarkNames(dataset);
  if (names.empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unknown dataset '", dataset, "'")));
  }
  for (const std::string& n : names) {
    std::printf("%s%s\n", datasets::Uri(dataset, n).c_str(),
                datasets::InTestSplit(dataset, n) ? "  [test]" : "");
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "looptool tune|eval|benchmarks [flags]: tune loop nests with LoopTool");
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
  std::fprintf(stderr,
               "usage: looptool tune --benchmark=URI|FILE [--search=ALGO] [--time-limit=S] "
               "[--server=HOST:PORT] [--json]\n"
               "       looptool eval --benchmark=URI|FILE --actions=a,b,c [--json]\n"
               "       looptool benchmarks [--dataset=NAME]\n"
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
