#include "client/cpp/loop_set_network.h"

#include <limits>

namespace looptool::client {
namespace {

// [mean over the real rows, max over them] of `rows` (zeros when there is no real row).
Eigen::RowVectorXd Pool(const Eigen::MatrixXd& rows, const std::vector<bool>& real) {
  const Eigen::Index width = rows.cols();
  Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(width);
  Eigen::RowVectorXd max =
      Eigen::RowVectorXd::Constant(width, -std::numeric_limits<double>::infinity());
  int count = 0;
  for (Eigen::Index r = 0; r < rows.rows(); ++r) {
    if (!real[r]) continue;
    ++count;
    sum += rows.row(r);
    max = max.cwiseMax(rows.row(r));
  }
  Eigen::RowVectorXd out = Eigen::RowVectorXd::Zero(2 * width);
  if (count > 0) {
    out.head(width) = sum / count;
    out.tail(width) = max;
  }
  return out;
}

}  // namespace

LoopSetNetwork::Layer LoopSetNetwork::Convert(const DenseLayer& l) {
  Layer out;
  out.weight = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                              Eigen::RowMajor>>(l.weight.data(), l.out, l.in)
                   .cast<double>();
  out.bias = Eigen::Map<const Eigen::RowVectorXf>(l.bias.data(), l.out).cast<double>();
  return out;
}

LoopSetNetwork::LoopSetNetwork(const std::vector<DenseLayer>& trunk, const DenseLayer& mix,
                               const DenseLayer& head, const DenseLayer& query,
                               const DenseLayer& key, const DenseLayer& value)
    : mix_(Convert(mix)),
      head_(Convert(head)),
      query_(Convert(query)),
      key_(Convert(key)),
      value_(Convert(value)) {
  for (const DenseLayer& l : trunk) trunk_.push_back(Convert(l));
}

LoopSetOutputs LoopSetNetwork::Apply(absl::Span<const float> observation) const {
  const Eigen::Index width = trunk_.front().weight.cols();
  const Eigen::Index rows = static_cast<Eigen::Index>(observation.size()) / width;
  Eigen::MatrixXd e =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          observation.data(), rows, width)
          .cast<double>();
  std::vector<bool> real(rows);
  for (Eigen::Index r = 0; r < rows; ++r) real[r] = e(r, 0) > 0.5;
  const auto apply = [](const Layer& l, const Eigen::MatrixXd& x) -> Eigen::MatrixXd {
    Eigen::MatrixXd y = x * l.weight.transpose();
    y.rowwise() += l.bias;
    return y;
  };
  for (const Layer& l : trunk_) e = apply(l, e).cwiseMax(0.0);
  // mix([e_r, c]) = e_r Wl^T + (c Wr^T + b): the context's part is the same for every row.
  const Eigen::Index h = e.cols();
  const Eigen::RowVectorXd context = Pool(e, real);
  const Eigen::RowVectorXd shared =
      context * mix_.weight.rightCols(2 * h).transpose() + mix_.bias;
  Eigen::MatrixXd hidden = e * mix_.weight.leftCols(h).transpose();
  hidden.rowwise() += shared;
  hidden = hidden.cwiseMax(0.0);
  LoopSetOutputs out;
  out.head = apply(head_, hidden);
  out.attention = apply(query_, hidden) * apply(key_, hidden).transpose();
  out.stop = (Pool(hidden, real) * value_.weight.transpose() + value_.bias)(0);
  return out;
}

}  // namespace looptool::client
