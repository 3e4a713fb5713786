// Property test: thousands of random action sequences on every primitive of the language. After
// every action the `ir` text round-trips; at the end the interpreter visits every iteration
// point exactly once and computes exactly what the untiled schedule computes.
#include <random>

#include "absl/strings/str_join.h"
#include "backend/actions/apply.h"
#include "backend/interp/interpreter.h"
#include "backend/ir/parser.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree_text.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

// Every primitive, at sizes that no split factor divides evenly.
constexpr const char* kPrograms[] = {
    "C[m,n] += A[m,k] * B[k,n]; m=13 n=19 k=11",
    "y[m] += A[m,k] * x[k]; m=17 k=23",
    "y[n] += x[k] * A[k,n]; n=21 k=9",
    "O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=7 c=9 kr=3 kc=2",
    "O[r,c] max= I[2*r+kr, 2*c+kc]; r=5 c=6 kr=3 kc=2",
    "s[m] += A[m,n]; m=7 n=23",
    "t[] += A[m,n]; m=6 n=10",
    "B[n,m] = A[m,n]; m=11 n=13",
    "B[m,n] = a[n]; m=9 n=17",
    "C[m,a] = A[m,a]; C[m,b+12] = B[m,b]; m=5 a=12 b=7",
    "C[m,n] += A[m,k] * B[k,n] -> relu; m=10 n=6 k=7",
    "C[m,n] = A[m,n] + B[m,n]; m=3 n=37",
    "s[m] max= A[m,n] * B[m,n] -> relu; m=6 n=15",
};

constexpr int kSequencesPerProgram = 250;
constexpr int kMaxLength = 24;
constexpr int kMaskChecksPerProgram = 40;  // sequences whose last tree's whole mask is checked

// Runs the property over random sequences in `space`: every action drawn uniformly from the
// space, or (`legal_only`, for loop_nest, whose level pointers mostly name no loop) from the
// actions the mask allows.
void CheckRandomSequences(const ActionSpace& space, bool legal_only, uint32_t seed) {
  std::mt19937 rng(seed);
  int sequences = 0, effective_actions = 0;
  for (const char* text : kPrograms) {
    SCOPED_TRACE(text);
    auto parsed = ParseProgram(text, Limits{});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const auto program = std::make_shared<const Program>(*std::move(parsed));
    const LoopTree initial = LoopTree::Initial(program);
    TensorData reference = AllocateTensors(*program);
    FillInputs(*program, 7, /*small_integers=*/true, reference);
    Interpret(initial, reference);

    for (int seq = 0; seq < kSequencesPerProgram; ++seq) {
      LoopTree tree = initial;
      std::vector<std::string> applied;
      const int length = 1 + static_cast<int>(rng() % kMaxLength);
      for (int i = 0; i < length; ++i) {
        int index = static_cast<int>(rng() % space.size());
        if (legal_only) {
          const std::vector<bool> mask = ActionMask(tree, space, Limits{});
          std::vector<int> legal;
          for (int a = 0; a < space.size(); ++a) {
            if (mask[a]) legal.push_back(a);
          }
          if (legal.empty()) break;
          index = legal[rng() % legal.size()];
        }
        const Action action = space.actions[index];
        ActionResult r = Apply(tree, action, Limits{});
        applied.push_back(ActionName(action));
        // The mask says what would change the state (ActionMask's shortcuts included).
        if (legal_only) {
          ASSERT_TRUE(r.had_effect()) << absl::StrJoin(applied, " ");
        }
        if (!r.had_effect()) {
          ASSERT_EQ(r.tree, tree);
          continue;
        }
        ++effective_actions;
        tree = std::move(r.tree);
        auto back = ParseIr(PrintIr(tree), Limits{});
        ASSERT_TRUE(back.ok()) << back.status() << "\n" << PrintIr(tree);
        ASSERT_EQ(*back, tree) << PrintIr(tree);
      }
      SCOPED_TRACE(LoopTreeText(tree));
      // The mask (which shares interchanges' swaps between targets) says of every action what
      // applying it says, under the default limits, limits the tree just fits and limits with room
      // for one more loop.
      if (legal_only && seq < kMaskChecksPerProgram) {
        Limits tight, one_more;
        tight.max_loops = tree.num_loops();
        one_more.max_loops = tree.num_loops() + 1;
        for (const Limits& limits : {Limits{}, tight, one_more}) {
          const std::vector<bool> mask = ActionMask(tree, space, limits);
          ASSERT_EQ(mask.size(), space.actions.size());
          for (int a = 0; a < space.size(); ++a) {
            ASSERT_EQ(mask[a], Apply(tree, space.actions[a], limits).had_effect())
                << ActionName(space.actions[a]) << " with max_loops " << limits.max_loops;
          }
        }
      }
      TensorData data = AllocateTensors(*program);
      FillInputs(*program, 7, /*small_integers=*/true, data);
      VisitCounts counts;
      Interpret(tree, data, &counts);
      for (const auto& per_statement : counts.compute) {
        for (int c : per_statement) ASSERT_EQ(c, 1);
      }
      for (const auto& per_statement : counts.write) {
        for (int c : per_statement) ASSERT_EQ(c, 1);
      }
      for (int t : program->OutputTensors()) ASSERT_EQ(data[t], reference[t]);
      // The interpreter's hot path (taken without visit counts) computes the same.
      TensorData fast = AllocateTensors(*program);
      FillInputs(*program, 7, /*small_integers=*/true, fast);
      Interpret(tree, fast);
      for (int t : program->OutputTensors()) ASSERT_EQ(fast[t], reference[t]);
      ++sequences;
    }
  }
  EXPECT_EQ(sequences, kSequencesPerProgram * static_cast<int>(std::size(kPrograms)));
  EXPECT_GT(effective_actions, sequences * 3);  // the sequences really edit the trees
}

TEST(RandomSequences, ResultsIterationCountsAndIrArePreserved) {
  CheckRandomSequences(LoopToolActionSpace(), /*legal_only=*/false, 20261122);
}

TEST(RandomSequences, LoopNestSequencesPreserveThemToo) {
  CheckRandomSequences(LoopNestActionSpace(), /*legal_only=*/true, 20261124);
}

TEST(RandomSequences, InterpreterComputesTheProgramNotJustAConstant) {
  // The oracle itself, against hand-computed values: a 2x2 matmul plus relu, a strided max pool.
  auto mm = ParseProgram("C[m,n] += A[m,k] * B[k,n] -> relu; m=2 n=2 k=2", Limits{});
  ASSERT_TRUE(mm.ok());
  TensorData d = AllocateTensors(*mm);
  d[1] = {1, 2, 3, 4};   // A
  d[2] = {5, 6, -7, 8};  // B
  Interpret(LoopTree::Initial(std::make_shared<const Program>(*mm)), d);
  EXPECT_EQ(d[0], (TensorBuffer{0, 22, 0, 50}));  // [-9, 22; -13, 50] through relu

  auto pool = ParseProgram("O[r] max= I[2*r + kr]; r=3 kr=3", Limits{});
  ASSERT_TRUE(pool.ok());
  TensorData q = AllocateTensors(*pool);
  q[1] = {1, -5, 3, 9, -2, 0, 4};
  Interpret(LoopTree::Initial(std::make_shared<const Program>(*pool)), q);
  EXPECT_EQ(q[0], (TensorBuffer{3, 9, 4}));
}

}  // namespace
}  // namespace looptool
