// LoopSetNetwork against its header's formulas, computed here one number at a time in double,
// on small random networks; a hand-worked case; rows that are not real stay out of the pools.
#include "client/cpp/loop_set_network.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace looptool::client {
namespace {

DenseLayer Random(int in, int out, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  DenseLayer l{in, out, std::vector<float>(static_cast<size_t>(in) * out), std::vector<float>(out)};
  for (float& w : l.weight) w = u(rng);
  for (float& b : l.bias) b = u(rng);
  return l;
}

using Vec = std::vector<double>;

Vec Dense(const DenseLayer& l, const Vec& x, bool relu) {
  Vec y(l.out);
  for (int o = 0; o < l.out; ++o) {
    double s = l.bias[o];
    for (int i = 0; i < l.in; ++i) s += double{l.weight[o * l.in + i]} * x[i];
    y[o] = relu ? std::max(s, 0.0) : s;
  }
  return y;
}

// [mean over real rows, max over real rows], zeros when none is real.
Vec Pool(const std::vector<Vec>& rows, const std::vector<bool>& real) {
  const size_t w = rows.front().size();
  Vec out(2 * w, 0.0);
  int n = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!real[r]) continue;
    for (size_t j = 0; j < w; ++j) {
      out[j] += rows[r][j];
      out[w + j] = n == 0 ? rows[r][j] : std::max(out[w + j], rows[r][j]);
    }
    ++n;
  }
  for (size_t j = 0; j < w && n > 0; ++j) out[j] /= n;
  return out;
}

struct Net {
  std::vector<DenseLayer> trunk;
  DenseLayer mix, head, query, key, value;
  LoopSetNetwork Build() const { return LoopSetNetwork(trunk, mix, head, query, key, value); }
};

Net RandomNet(int input, int hidden, int heads, int attention, std::mt19937& rng) {
  Net n;
  n.trunk = {Random(input, hidden, rng), Random(hidden, hidden, rng)};
  n.mix = Random(3 * hidden, hidden, rng);
  n.head = Random(hidden, heads, rng);
  n.query = Random(hidden, attention, rng);
  n.key = Random(hidden, attention, rng);
  n.value = Random(2 * hidden, 1, rng);
  return n;
}

TEST(LoopSetNetwork, MatchesTheFormulasOnRandomNetworks) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3, 3);
  for (int trial = 0; trial < 20; ++trial) {
    const int input = 3 + trial % 4, hidden = 4 + trial % 5, rows = 1 + trial % 6;
    const Net net = RandomNet(input, hidden, 2 + trial % 3, 3, rng);
    std::vector<float> obs(static_cast<size_t>(rows) * input);
    for (float& x : obs) x = u(rng);
    std::vector<bool> real(rows);
    for (int r = 0; r < rows; ++r) {
      real[r] = r % 3 != 2;  // every third row is padding
      obs[r * input] = real[r] ? 1.0f : 0.0f;
    }
    // The formulas, row by row.
    std::vector<Vec> e(rows);
    for (int r = 0; r < rows; ++r) {
      e[r] = Vec(obs.begin() + r * input, obs.begin() + (r + 1) * input);
      for (const DenseLayer& l : net.trunk) e[r] = Dense(l, e[r], /*relu=*/true);
    }
    const Vec c = Pool(e, real);
    std::vector<Vec> h(rows);
    for (int r = 0; r < rows; ++r) {
      Vec x = e[r];
      x.insert(x.end(), c.begin(), c.end());
      h[r] = Dense(net.mix, x, /*relu=*/true);
    }
    const LoopSetOutputs out = net.Build().Apply(obs);
    ASSERT_EQ(out.head.rows(), rows);
    ASSERT_EQ(out.head.cols(), net.head.out);
    ASSERT_EQ(out.attention.rows(), rows);
    ASSERT_EQ(out.attention.cols(), rows);
    for (int r = 0; r < rows; ++r) {
      const Vec head = Dense(net.head, h[r], false);
      for (int j = 0; j < net.head.out; ++j) EXPECT_NEAR(out.head(r, j), head[j], 1e-9);
      const Vec q = Dense(net.query, h[r], false);
      for (int t = 0; t < rows; ++t) {
        const Vec k = Dense(net.key, h[t], false);
        double dot = 0;
        for (size_t i = 0; i < q.size(); ++i) dot += q[i] * k[i];
        EXPECT_NEAR(out.attention(r, t), dot, 1e-9) << r << " " << t;
      }
    }
    EXPECT_NEAR(out.stop, Dense(net.value, Pool(h, real), false)[0], 1e-9) << trial;
  }
}

TEST(LoopSetNetwork, AHandWorkedCase) {
  // One input feature (the real flag itself), hidden 1: e = relu(2x - 1) per trunk layer
  // (then relu(1e - 0)), mix weights [1, 10, 100] (e, mean, max), head 1, query 1, key 2,
  // value [1, -1] (mean minus max of h) + 0.5.
  Net n;
  n.trunk = {DenseLayer{1, 1, {2}, {-1}}, DenseLayer{1, 1, {1}, {0}}};
  n.mix = DenseLayer{3, 1, {1, 10, 100}, {0}};
  n.head = DenseLayer{1, 1, {1}, {0}};
  n.query = DenseLayer{1, 1, {1}, {0}};
  n.key = DenseLayer{1, 1, {2}, {0}};
  n.value = DenseLayer{2, 1, {1, -1}, {0.5}};
  // Rows 1, 3 (real: e = 1, 5), 0.25 (padding: e = relu(-0.5) = 0).
  const LoopSetOutputs out = n.Build().Apply(std::vector<float>{1, 3, 0.25f});
  // c = [mean 3, max 5]: h = e + 30 + 500 -> 531, 535, 530 (the padding row too).
  EXPECT_DOUBLE_EQ(out.head(0, 0), 531);
  EXPECT_DOUBLE_EQ(out.head(1, 0), 535);
  EXPECT_DOUBLE_EQ(out.head(2, 0), 530);
  EXPECT_DOUBLE_EQ(out.attention(0, 1), 531.0 * 2 * 535);
  EXPECT_DOUBLE_EQ(out.attention(2, 0), 530.0 * 2 * 531);
  // stop = mean(531, 535) - max(531, 535) + 0.5: the padding row's 530 is in neither.
  EXPECT_DOUBLE_EQ(out.stop, 533 - 535 + 0.5);
}

TEST(LoopSetNetwork, NoRealRowPoolsToZeros) {
  Net n;
  n.trunk = {DenseLayer{1, 1, {1}, {1}}};
  n.mix = DenseLayer{3, 1, {1, 1, 1}, {0}};
  n.head = DenseLayer{1, 1, {1}, {0}};
  n.query = DenseLayer{1, 1, {1}, {0}};
  n.key = DenseLayer{1, 1, {1}, {0}};
  n.value = DenseLayer{2, 1, {1, 1}, {0.25}};
  const LoopSetOutputs out = n.Build().Apply(std::vector<float>{0.5f, -2});
  EXPECT_DOUBLE_EQ(out.head(0, 0), 1.5);  // e = 1.5, context zeros
  EXPECT_DOUBLE_EQ(out.head(1, 0), 0);    // e = relu(-1) = 0
  EXPECT_DOUBLE_EQ(out.stop, 0.25);       // pools of nothing are zeros
}

}  // namespace
}  // namespace looptool::client
