// LoopSetNetwork: a loop_set policy's network (client/python/looptool/rl/loop_set.py) evaluated in
// double (its numbers reach the tens, and float rounding through its five layers would drift past
// 1e-5 from PyTorch's), its layers' weights converted once, every row at once. For the rows x_r
// of an observation (a row is real when x_r[0] > 0.5):
//   e_r = trunk(x_r)                       (ReLU after every trunk layer)
//   c   = [mean of e over real rows, max of e over real rows]   (zeros when no row is real)
//   h_r = relu(mix([e_r, c]))
//   head_r = head(h_r); attention[p][t] = query(h_p) . key(h_t)
//   stop = value([mean of h over real rows, max of h over real rows])
// Which action each number scores is the policy's business (policy.cc), not this file's.
#ifndef LOOPTOOL_CLIENT_CPP_LOOP_SET_NETWORK_H_
#define LOOPTOOL_CLIENT_CPP_LOOP_SET_NETWORK_H_

#include <vector>

#include "eigen3/Eigen/Core"
#include "absl/types/span.h"
#include "client/cpp/plan_cost.h"

namespace looptool::client {

struct LoopSetOutputs {
  Eigen::MatrixXd head;       // rows x head.out
  Eigen::MatrixXd attention;  // rows x rows
  double stop = 0;
};

class LoopSetNetwork {
 public:
  // REQUIRES: the layers chain as Policy::Parse checks (trunk, mix 3H->H, head H->*, query and
  // key H->D, value 2H->1).
  LoopSetNetwork(const std::vector<DenseLayer>& trunk, const DenseLayer& mix,
                 const DenseLayer& head, const DenseLayer& query, const DenseLayer& key,
                 const DenseLayer& value);

  // REQUIRES: observation.size() is a positive multiple of the trunk's input size.
  LoopSetOutputs Apply(absl::Span<const float> observation) const;

 private:
  struct Layer {
    Eigen::MatrixXd weight;  // out x in
    Eigen::RowVectorXd bias;
  };
  static Layer Convert(const DenseLayer& l);

  std::vector<Layer> trunk_;
  Layer mix_, head_, query_, key_, value_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_LOOP_SET_NETWORK_H_
