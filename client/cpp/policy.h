// Policy: a trained tuning policy, read from the JSON file `python3 -m looptool.rl.train` or
// `python3 -m looptool.rl.imitate` writes (formats: client/python/looptool/rl/policy_file.py and
// loop_set.py), and its forward pass: observation -> one score per action. Kinds: a dueling
// Q-network's Q-values or an actor-critic's logits over `loops_tensor`; a sketch_value policy's
// one number, the value of the state observed (it chooses among the server's sketches by the
// states they lead to: search.h's `policy`); a loop_set policy's scores over `loop_features`
// (a DeepSets network over the rows, one per loop): loop_nest's 560 actions, then "stop". The
// same numbers as PyTorch's within 1e-5 (tests/python/rl_test.py and loop_set_test.py check it).
// A loop_set policy may carry a cost model (plan_cost.h) that ranks the states its episodes end in.
#ifndef LOOPTOOL_CLIENT_CPP_POLICY_H_
#define LOOPTOOL_CLIENT_CPP_POLICY_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/cpp/loop_set_network.h"
#include "client/cpp/plan_cost.h"

namespace looptool::client {

class Policy {
 public:
  enum class Kind { kDuelingQ, kActorCritic, kSketchValue, kLoopSet };

  // INVALID_ARGUMENT, saying what is wrong, for text that is not a policy file of version 1
  // (bad JSON, unknown kind or preprocess, layers whose sizes do not chain, bad base64).
  static absl::StatusOr<Policy> Parse(absl::string_view json);
  // Parse() of a file's contents; NOT_FOUND when it cannot be read.
  static absl::StatusOr<Policy> Load(const std::string& path);
  // The default policy, committed under datasets/policies/ and built into the binary: the
  // sketch_value policy (sketch_value.json, action space loop_nest).
  static const Policy& Default();
  // The Ape-X DQN policy in LoopTune's 7-action cursor space (looptune_dqn.json), also built in:
  // evolution's seed when no policy is given, and `looptool tune --policy=looptune_dqn`.
  static const Policy& LoopTuneDqn();
  // The loop_set policy imitation learned from tuning records timed at AVX-512 (loop_set.json),
  // also built in: `looptool tune --search=policy --policy=loop_set` on an AVX-512 server.
  static const Policy& LoopSet();
  // The built-in loop_set policy learned from records timed with `isa`'s vectors (kernel_abi's
  // "isa"): loop_set_avx2.json for "avx2" and "sse" (learned at 8 lanes; never measured on SSE's
  // scalar code), LoopSet() otherwise.
  // `--policy=loop_set` means this policy for each server's ISA (TuneOptions::loop_set_by_isa).
  static const Policy& LoopSetFor(absl::string_view isa);
  // A built-in policy by name ("sketch_value", "looptune_dqn", "loop_set": LoopSet(), the
  // AVX-512 file; the searches swap in each server's ISA's where TuneOptions::loop_set_by_isa
  // says), else Load(name_or_path).
  static absl::StatusOr<Policy> Find(const std::string& name_or_path);

  // One score per action for one observation (sketch_value: one, the state's value; loop_set:
  // num_actions() + 1, the last one stop's).
  // REQUIRES: ObservationFits(observation.size()).
  std::vector<float> Scores(absl::Span<const float> observation) const;
  // The highest-scoring action `mask` allows (the lowest index on ties); -1 when it allows none,
  // and for a loop_set policy also when stop scores higher than that action. Entries of `mask`
  // past num_actions() (actions a space gained after the policy was trained) are never chosen.
  int Act(absl::Span<const float> observation, const std::vector<bool>& mask) const;
  // The highest-scoring action `mask` allows, whatever stop scores; -1 when it allows none.
  int BestAllowed(absl::Span<const float> observation, const std::vector<bool>& mask) const;
  // Whether an observation of `size` numbers is what the policy reads: input_size() of them, or
  // for a loop_set policy whole rows of input_size() (any number of rows, at least one).
  bool ObservationFits(size_t size) const;

  Kind kind() const { return kind_; }
  const std::string& action_space() const { return action_space_; }
  const std::string& observation_space() const { return observation_space_; }
  // Numbers per observation (loop_set: per row of loop_features).
  int input_size() const { return layers_.front().in; }
  int num_actions() const { return num_actions_; }
  // The file's "meta" object (how it was trained), as JSON text.
  const std::string& meta() const { return meta_; }
  // A loop_set policy's cost model (the file's "cost" entry), or nullptr when it has none.
  const PlanCost* cost_model() const { return cost_.has_value() ? &*cost_ : nullptr; }
  // A loop_set policy's other networks (the file's "members": each a network's layers, at most
  // 7, the file's other fields shared; no cost model of their own): the searches that play a
  // policy's likeliest episodes (search.h's policy and policy_guided) play those of each network,
  // sharing their number between the networks, and rank all of them by the one cost model.
  // Scores() and Act() are this policy's own network's.
  const std::vector<Policy>& members() const { return members_; }

 private:
  using Layer = DenseLayer;
  // y = W x + b, accumulated in double.
  static void Apply(const Layer& layer, absl::Span<const float> x, std::vector<float>& y);
  std::vector<float> LoopSetScores(absl::Span<const float> observation) const;

  Kind kind_ = Kind::kDuelingQ;
  std::string action_space_, observation_space_, meta_;
  int num_actions_ = 0;
  std::vector<Layer> layers_;  // the trunk (ReLU after each; loop_set: applied to every row)
  Layer head_, value_;
  std::shared_ptr<const LoopSetNetwork> network_;  // loop_set only: its forward pass
  std::optional<PlanCost> cost_;  // loop_set only, optional
  std::vector<Policy> members_;   // loop_set only, optional
};

// Indices below `num_actions` of the actions `mask` allows, best score first (ties: lowest index
// first). A loop_set policy's scores end with stop's, at index num_actions, never ranked, even
// where the session's space has more actions than the policy and its mask goes on past it.
std::vector<int> RankActions(const std::vector<float>& scores, const std::vector<bool>& mask,
                             int num_actions);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_POLICY_H_
