// The matmul shapes the tuning benchmarks (tune_bench, halide_bench) compare on: test-split
// shapes of mm64_256_16_range-v0 spread evenly over the split, and a fixed list of shapes off its
// grid (odd, prime and rectangular sizes in 32..512).
#ifndef LOOPTOOL_BENCH_MATMUL_SHAPES_H_
#define LOOPTOOL_BENCH_MATMUL_SHAPES_H_

#include <string>
#include <vector>

#include "datasets/matmul_range.h"

namespace looptool::bench {

struct Shape {
  datasets::MatmulShape shape;
  bool offgrid = false;
  std::string name() const { return datasets::MatmulName(shape); }
};

// `count` test-split shapes, spread evenly over the split (at most its size).
std::vector<Shape> TestShapes(int count);
// The first `count` (at most 12) shapes off the grid (matmul_offgrid-v0's).
std::vector<Shape> OffGridShapes(int count);

// Pins the calling thread to `core` (nothing for a negative core).
void PinThisThread(int core);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_MATMUL_SHAPES_H_
