// The environment: steps by index, errors for bad indices and names, every observation's kind
// and shape as declared, and forks that never affect their parent.
#include "backend/env/environment.h"

#include "backend/codegen/compile.h"
#include "backend/codegen/kernel.h"
#include "backend/codegen/kernel_plan.h"
#include "backend/interp/interpreter.h"
#include "backend/env/loop_tree_engine.h"
#include "backend/ir/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

using ::testing::ElementsAre;

Environment MakeEnv(const ActionSpace& space, KernelBackend kernels = {}) {
  auto p = ParseProgram("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256", Limits{});
  EXPECT_TRUE(p.ok());
  return Environment(LoopTree::Initial(std::make_shared<const Program>(*p)), space, Limits{},
                     std::move(kernels));
}

class FakeTimer : public KernelTimer {
 public:
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t) override {
    ++calls;
    return Measurement{0.5, 2.0 * tree.num_loops()};
  }
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override {
    return MeasureFor(tree, tenant);
  }
  void PrepareFor(const LoopTree& tree, uint64_t tenant) override {
    prepared.emplace_back(tree.num_loops(), tenant);
  }
  absl::StatusOr<double> PeakGflops() override { return 123.0; }
  absl::StatusOr<MemoryProfile> Memory() override {
    return MemoryProfile{{{"L1", 32 << 10}, {"L2", 1 << 20}, {"DRAM", 0}},
                         {{4096, 100.0}, {262144, 50.0}, {1 << 20, 10.0}}};
  }
  int calls = 0;
  std::vector<std::pair<int, uint64_t>> prepared;  // (loops, tenant) of each PrepareFor
};

// A timer of an older kind: no memory levels.
class PeakOnlyTimer : public FakeTimer {
 public:
  absl::StatusOr<MemoryProfile> Memory() override { return KernelTimer::Memory(); }
};

class FakeCostModel : public CostPredictor {
 public:
  double PredictGflops(const LoopTree& tree) const override { return 3.0 * tree.num_loops(); }
};

TEST(Environment, StepsByIndexAndRecordsLoopToolIndices) {
  Environment env = MakeEnv(LoopTuneActionSpace());
  EXPECT_EQ(*env.Step(4), NoEffectReason::kNone);       // split_4
  EXPECT_EQ(*env.Step(0), NoEffectReason::kFirstLoop);  // up: no effect, still recorded
  EXPECT_THAT(env.history(), ElementsAre(5, 0));        // split_4 is loop_tool index 5
  EXPECT_EQ(env.tree().schedule(0).compute[0].size, 28);
  const auto bad = env.Step(7);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "Action index 7 is out of range for action space loop_tune (0..6)");
  EXPECT_THAT(env.history(), ElementsAre(5, 0));  // nothing recorded
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(env.Step(1).ok());  // down
  EXPECT_EQ(env.history().size(), Environment::kHistory);  // bounded: the last 64
  EXPECT_EQ(env.history().front(), 1);
}

TEST(Environment, EveryObservationMatchesItsDeclaredSpace) {
  auto ev = std::make_shared<FakeTimer>();
  Environment env =
      MakeEnv(LoopToolActionSpace(), {Isa::kAvx512, ev, std::make_shared<FakeCostModel>()});
  for (const ObservationSpace& space : ObservationSpaces(Limits{})) {
    SCOPED_TRACE(space.name);
    auto obs = env.Observe(space.name);
    ASSERT_TRUE(obs.ok()) << obs.status();
    EXPECT_EQ(obs->kind, space.kind);
    EXPECT_EQ(obs->kind, space.default_value.kind);
    if (space.kind == Observation::Kind::kFloatTensor) {
      EXPECT_EQ(obs->shape, space.shape);
      EXPECT_EQ(obs->floats.size(), static_cast<size_t>(space.shape[0] * space.shape[1]));
      for (float f : obs->floats) {
        EXPECT_GE(f, space.low);
        EXPECT_LE(f, space.high);
      }
    }
  }
  EXPECT_EQ(env.Observe("flop_count")->integer, 2 * 112 * 208 * 256);
  EXPECT_EQ(env.Observe("flops")->number, 8.0);  // the fake's 2 * num_loops
  EXPECT_EQ(env.Observe("runtime")->number, 0.5);
  EXPECT_EQ(env.Observe("peak_gflops")->number, 123.0);
  EXPECT_EQ(env.Observe("predicted_gflops")->number, 12.0);  // the fake's 3 * num_loops
  // The roofline of the 112x208x256 matmul: 4 * (112*256 + 256*208 + 112*208) = 420864 bytes
  // fit L2 (8.4 us at the 256 KiB buffer's 50 GB/s); 11927552 flops at the peak, 123 GFLOPS,
  // take longer (97 us).
  const std::string roofline = env.Observe("roofline")->text;
  EXPECT_NE(roofline.find("\"bytes\":420864,"), std::string::npos) << roofline;
  EXPECT_NE(roofline.find("\"level\":\"L2\","), std::string::npos) << roofline;
  EXPECT_NE(roofline.find("\"gbytes_per_second\":50.0,"), std::string::npos) << roofline;
  EXPECT_NE(roofline.find("\"memory_bound\":false,"), std::string::npos) << roofline;
  EXPECT_DOUBLE_EQ(env.Observe("roofline_fraction")->number, 11927552 / 123e9 / 0.5);
  EXPECT_THAT(env.Observe("action_mask")->bools,
              ElementsAre(false, true, false, true, true, true, true, true, true, true, false,
                          false, false, false, false, true, true));
  EXPECT_EQ(env.Observe("loop_tree")->text.substr(0, 42), "for m in 112 : L0  <<<<<< cursor (line 0 )");
}

TEST(Environment, ObservationErrors) {
  Environment env = MakeEnv(LoopToolActionSpace());
  EXPECT_EQ(env.Observe("nope").status().message(), "Unknown observation space: nope");
  EXPECT_EQ(env.Observe("flops").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(env.Observe("peak_gflops").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(env.Observe("predicted_gflops").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(env.Observe("roofline").status().code(), absl::StatusCode::kFailedPrecondition);
  Environment old = MakeEnv(LoopToolActionSpace(), {Isa::kAvx512, std::make_shared<PeakOnlyTimer>()});
  EXPECT_EQ(old.Observe("roofline").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(old.Observe("roofline_fraction").status().message(),
            "this kernel timer does not measure memory bandwidth");
}

// kernel_plan: the code generator's plan for the kernel backend's target, untimed.
TEST(Environment, KernelPlanDescribesTheTargetsPlan) {
  auto p = ParseProgram("C[m,n] += A[m,k] * B[k,n]; m=4 n=32 k=8", Limits{});
  ASSERT_TRUE(p.ok());
  const LoopTree tree = LoopTree::Initial(std::make_shared<const Program>(*p));  // m k n
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    Environment env(tree, LoopToolActionSpace(), Limits{}, {isa, nullptr, nullptr});
    absl::StatusOr<Observation> plan = env.Observe("kernel_plan");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->text, DescribePlan(Lower(tree, isa), tree.program()));
  }
  Environment avx512(tree, LoopToolActionSpace(), Limits{}, {Isa::kAvx512, nullptr, nullptr});
  EXPECT_EQ(avx512.Observe("kernel_plan")->text,
            "statement 1: C[m, n] += A[m, k] * B[k, n]\n"
            "  avx512, 16 lanes, 8 accumulators\n"
            "  -- register scope\n"
            "  for m in 4 (unrolled)\n"
            "   for k in 8 (unrolled)\n"
            "    for n in 32 by 16 lanes (unrolled)\n");
}

// kernel_abi and machine_code: how to call the kernel, and its bytes, which run anywhere they are
// copied to and compute what the interpreter computes.
TEST(Environment, KernelAbiAndMachineCodeTakeTheKernelAway) {
  auto p = ParseProgram("C[m,n] += A[m,k] * B[k,n] -> relu; m=4 n=20 k=8", Limits{});
  ASSERT_TRUE(p.ok());
  const LoopTree tree = LoopTree::Initial(std::make_shared<const Program>(*p));
  Environment env(tree, LoopToolActionSpace(), Limits{}, {Isa::kAvx2, nullptr, nullptr});
  absl::StatusOr<Observation> abi = env.Observe("kernel_abi");
  ASSERT_TRUE(abi.ok()) << abi.status();
  EXPECT_EQ(abi->text,
            R"j({"alignment_bytes":4,"cpu_features":["avx","avx2","fma"],)j"
            R"j("entry":"void kernel(float* const* tensors)","flops":1360,"isa":"avx2",)j"
            R"j("program":"C[m, n] += A[m, k] * B[k, n] -> relu\nm=4 n=20 k=8\n",)j"
            R"j("tensors":[{"id":0,"name":"C","role":"output","shape":[4,20]},)j"
            R"j({"id":1,"name":"A","role":"input","shape":[4,8]},)j"
            R"j({"id":2,"name":"B","role":"input","shape":[8,20]}]})j");

  absl::StatusOr<Observation> code = env.Observe("machine_code");
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->kind, Observation::Kind::kBytes);
  KernelCompiler compiler(Isa::kAvx2);
  absl::StatusOr<std::vector<uint8_t>> expected = compiler.CompileCode(tree);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(code->text, std::string(expected->begin(), expected->end()));
  EXPECT_EQ(env.Observe("machine_code")->text, code->text);  // deterministic
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "this CPU cannot run the AVX2 kernel";
  TensorData want = AllocateTensors(tree.program());
  FillInputs(tree.program(), 5, /*small_integers=*/true, want);
  TensorData got = want;
  Interpret(tree, want);
  got[0].assign(got[0].size(), -7.0f);  // every element is overwritten
  absl::StatusOr<Kernel> kernel = Kernel::FromCode(
      reinterpret_cast<const uint8_t*>(code->text.data()), code->text.size());
  ASSERT_TRUE(kernel.ok());
  std::vector<float*> pointers = {got[0].data(), got[1].data(), got[2].data()};
  kernel->Run(pointers.data());
  EXPECT_EQ(got[0], want[0]);
}

TEST(LoopTreeEngine, ANewEpisodeHintsItsTimerOnItsTenantsBehalf) {
  auto timer = std::make_shared<FakeTimer>();
  LoopTreeEngine engine(Limits{}, KernelBackend{DetectIsa(), timer});
  EpisodeRequest request{"benchmark://test-v0/mm", 0, [](const std::string&) {
                           return absl::StatusOr<std::shared_ptr<const Program>>(
                               std::make_shared<const Program>(
                                   *ParseProgram("C[m,n] += A[m,k] * B[k,n]; m=4 n=8 k=2",
                                                 Limits{})));
                         },
                         7};
  ASSERT_TRUE(engine.NewEpisode(request).ok());
  const int loops = LoopTree::Initial(std::make_shared<const Program>(*ParseProgram(
                                          "C[m,n] += A[m,k] * B[k,n]; m=4 n=8 k=2", Limits{})))
                        .num_loops();
  EXPECT_THAT(timer->prepared, ElementsAre(std::make_pair(loops, uint64_t{7})));
  EXPECT_EQ(timer->calls, 0);  // a hint, no measurement
}

TEST(Environment, ForkIsIndependent) {
  Environment parent = MakeEnv(LoopToolActionSpace());
  Environment child = parent;
  ASSERT_TRUE(child.Step(5).ok());  // split_4 in the child only
  EXPECT_NE(child.tree(), parent.tree());
  EXPECT_TRUE(parent.history().empty());
  ASSERT_TRUE(parent.Step(1).ok());
  EXPECT_EQ(child.tree().cursor().depth, 0);
  EXPECT_EQ(parent.tree().cursor().depth, 1);
}

TEST(Environment, PrevActionsTensorUsesLoopToolIndices) {
  Environment env = MakeEnv(LoopTuneActionSpace());
  ASSERT_TRUE(env.Step(6).ok());  // split_16 = loop_tool index 7
  const auto t = env.Observe("5_prev_actions_tensor");
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->shape, ElementsAre(1, 85));
  EXPECT_EQ(t->floats[7], 1.0f);
  float sum = 0;
  for (float f : t->floats) sum += f;
  EXPECT_EQ(sum, 1.0f);
}

}  // namespace
}  // namespace looptool

namespace looptool {
namespace {

// The registry is the one list: slowness is declared there, and a new observation is one entry.
TEST(ObservationRegistry, SlowEntriesAndOneEntryExtensions) {
  const ObservationRegistry registry = LoopToolObservations(Limits{});
  std::vector<std::string> slow;
  for (const auto& e : registry.entries()) {
    if (e.slow) slow.push_back(e.space.name);
  }
  EXPECT_THAT(slow, ElementsAre("flops", "runtime", "timing", "peak_gflops", "machine_code",
                                 "roofline", "roofline_fraction"));

  std::vector<ObservationEntry<ObservationInputs>> entries = registry.entries();
  ObservationSpace depth{"cursor_depth", Observation::Kind::kInt64};
  entries.push_back({depth, false, [](const ObservationInputs& in) {
                       return Observation::Int64(in.tree.cursor().depth);
                     }});
  auto p = ParseProgram("C[m,n] += A[m,k] * B[k,n]; m=16 n=16 k=16", Limits{});
  ASSERT_TRUE(p.ok());
  Environment env(LoopTree::Initial(std::make_shared<const Program>(*p)), LoopToolActionSpace(),
                  Limits{}, {}, std::make_shared<const ObservationRegistry>(entries));
  ASSERT_TRUE(env.Step(1).ok());  // down
  EXPECT_EQ(env.Observe("cursor_depth")->integer, 1);
  EXPECT_EQ(env.Observe("nope").status().message(), "Unknown observation space: nope");
}

}  // namespace
}  // namespace looptool
