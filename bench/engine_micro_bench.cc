// engine_micro_bench: Google Benchmark micro-benchmarks of the in-process costs a Step pays on
// mm112_208_256, from the inside out: applying an action to a LoopTree, observing the state, the
// service's Step handler (no gRPC), and serializing its reply. Wire latency and throughput across
// clients are service_bench's.
//
//   bazel build -c opt //bench:engine_micro_bench
//   bazel-bin/bench/engine_micro_bench --benchmark_min_time=0.2
// Each benchmark runs 5 times and reports mean, median, stddev and cv, unless the command line
// passes its own --benchmark_repetitions.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/actions/apply.h"
#include "backend/env/environment.h"
#include "backend/env/loop_tree_engine.h"
#include "backend/ir/parser.h"
#include "benchmark/benchmark.h"
#include "datasets/matmul_range.h"
#include "proto/compiler_gym_service.pb.h"
#include "service/compiler_gym_service.h"

namespace looptool {
namespace {

namespace cg = compiler_gym;

constexpr char kBenchmarkUri[] = "benchmark://mm64_256_16_range-v0/mm112_208_256";
constexpr int kUp = 0, kDown = 1, kLoopsTensor = 2;  // loop_tool action / observation indices

LoopTree InitialTree() {
  auto program = std::make_shared<const Program>(
      *ParseProgram(datasets::MatmulProgram({112, 208, 256}), Limits{}));
  return LoopTree::Initial(program);
}

// Apply(split_4) on the initial tree (cursor on m=112): a new tree with one more loop.
void BM_ApplySplit(benchmark::State& state) {
  const LoopTree tree = InitialTree();
  const Action split{Action::Kind::kSplit, 4};
  const Limits limits;
  for (auto _ : state) {
    ActionResult r = Apply(tree, split, limits);
    benchmark::DoNotOptimize(r);
    if (!r.had_effect()) state.SkipWithError("split_4 had no effect");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ApplySplit);

// Apply(down) on the initial tree: the cursor moves, the schedules are copied.
void BM_ApplyCursorDown(benchmark::State& state) {
  const LoopTree tree = InitialTree();
  const Action down{Action::Kind::kDown};
  const Limits limits;
  for (auto _ : state) {
    ActionResult r = Apply(tree, down, limits);
    benchmark::DoNotOptimize(r);
    if (!r.had_effect()) state.SkipWithError("down had no effect");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ApplyCursorDown);

// Environment::Observe of one untimed space, on the initial state after split_4 and down (so the
// tree has a split loop and the cursor is not at its default place).
void BM_Observe(benchmark::State& state, const char* space) {
  Environment env(InitialTree(), LoopToolActionSpace(), Limits{});
  const int split4 = LoopToolActionSpace().IndexOf(Action{Action::Kind::kSplit, 4});
  if (!env.Step(split4).ok() || !env.Step(kDown).ok()) {
    state.SkipWithError("setup steps failed");
    return;
  }
  size_t size = 0;
  for (auto _ : state) {
    absl::StatusOr<Observation> o = env.Observe(space);
    if (!o.ok()) {
      state.SkipWithError(std::string(o.status().message()).c_str());
      break;
    }
    size = o->text.size() + o->floats.size() * sizeof(float) + o->bools.size();
    benchmark::DoNotOptimize(o);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["obs_bytes"] = static_cast<double>(size);  // text, floats (4 B), bools (1 B)
}
BENCHMARK_CAPTURE(BM_Observe, loops_tensor, "loops_tensor");
BENCHMARK_CAPTURE(BM_Observe, action_mask, "action_mask");
BENCHMARK_CAPTURE(BM_Observe, loop_tree, "loop_tree");
BENCHMARK_CAPTURE(BM_Observe, ir_graph_networkx, "ir_graph_networkx");

// ActionMask over loop_nest's 592 level-pointer actions on MobileNetV2's stem convolution after
// tile_L3_48 and tile_L6_8 (nine compute loops, three write-back loops): the mask a policy's
// every step asks for.
void BM_LoopNestMask(benchmark::State& state) {
  auto program = ParseProgram(
      "O[k, h, w] += I[c, 2*h + r, 2*w + s] * W[k, c, r, s]; k=32 h=112 w=112 c=3 r=3 s=3",
      Limits{});
  if (!program.ok()) {
    state.SkipWithError(std::string(program.status().message()).c_str());
    return;
  }
  LoopTree tree = LoopTree::Initial(std::make_shared<const Program>(*std::move(program)));
  for (const char* name : {"tile_L3_48", "tile_L6_8"}) {
    absl::StatusOr<Action> a = ActionFromName(name);
    ActionResult r = Apply(tree, *a, Limits{});
    if (!a.ok() || !r.had_effect()) {
      state.SkipWithError("setup actions failed");
      return;
    }
    tree = std::move(r.tree);
  }
  const ActionSpace& space = LoopNestActionSpace();
  int allowed = 0;
  for (auto _ : state) {
    const std::vector<bool> mask = ActionMask(tree, space, Limits{});
    allowed = static_cast<int>(std::count(mask.begin(), mask.end(), true));
    benchmark::DoNotOptimize(allowed);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed"] = allowed;
}
BENCHMARK(BM_LoopNestMask);

// A service with one session on mm112_208_256 (no kernel timer: no timed observations).
struct DirectService {
  DirectService()
      : service(service::ServiceOptions{},
                {std::make_shared<LoopTreeEngine>(Limits{}, KernelBackend{})}) {
    cg::StartSessionRequest start;
    start.mutable_benchmark()->set_uri(kBenchmarkUri);
    cg::StartSessionReply started;
    ok = service.StartSession(service::CallContext{"bench"}, start, started).ok();
    session = started.session_id();
  }
  cg::StepRequest CursorStep(int64_t i) const {
    cg::StepRequest r;
    r.set_session_id(session);
    r.add_action()->set_int64_value(i % 2 ? kUp : kDown);
    r.add_observation_space(kLoopsTensor);
    return r;
  }
  service::LoopToolService service;
  int64_t session = 0;
  bool ok = false;
};

// LoopToolService::Step in process: one cursor action (down/up alternating) and loops_tensor, the
// handler alone (session lookup and lock, the action, the observation, the reply's protobuf).
void BM_ServiceStep(benchmark::State& state) {
  DirectService d;
  if (!d.ok) {
    state.SkipWithError("StartSession failed");
    return;
  }
  const cg::StepRequest requests[2] = {d.CursorStep(0), d.CursorStep(1)};
  int64_t i = 0;
  for (auto _ : state) {
    cg::StepReply reply;
    if (!d.service.Step(requests[i++ % 2], reply).ok()) {
      state.SkipWithError("Step failed");
      break;
    }
    benchmark::DoNotOptimize(reply);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ServiceStep);

// Serializing that Step's reply (what the front end then hands to gRPC).
void BM_SerializeStepReply(benchmark::State& state) {
  DirectService d;
  cg::StepReply reply;
  if (!d.ok || !d.service.Step(d.CursorStep(0), reply).ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  std::string wire;
  for (auto _ : state) {
    wire.clear();
    reply.SerializeToString(&wire);
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(wire.size()));
  state.counters["reply_bytes"] = static_cast<double>(wire.size());
}
BENCHMARK(BM_SerializeStepReply);

}  // namespace
}  // namespace looptool

// Google Benchmark's main, with 5 repetitions reported as aggregates (mean, median, stddev, cv)
// unless the command line chooses its own --benchmark_repetitions.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool repetitions_given = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--benchmark_repetitions", 0) == 0) repetitions_given = true;
  }
  std::string reps = "--benchmark_repetitions=5";
  std::string aggregates = "--benchmark_report_aggregates_only=true";
  if (!repetitions_given) {
    args.insert(args.begin() + 1, {reps.data(), aggregates.data()});
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
