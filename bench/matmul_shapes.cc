#include "bench/matmul_shapes.h"

#include <sched.h>


namespace looptool::bench {

std::vector<Shape> TestShapes(int count) {
  std::vector<datasets::MatmulShape> test;
  for (const auto& s : datasets::MatmulRange()) {
    if (datasets::InTestSplit(s)) test.push_back(s);
  }
  std::vector<Shape> out;
  for (int i = 0; i < count && i < static_cast<int>(test.size()); ++i) {
    out.push_back({test[i * test.size() / count], false});
  }
  return out;
}

std::vector<Shape> OffGridShapes(int count) {
  const std::vector<datasets::MatmulShape>& shapes = datasets::OffGridMatmuls();
  std::vector<Shape> out;
  for (int i = 0; i < count && i < static_cast<int>(shapes.size()); ++i) {
    out.push_back({shapes[i], true});
  }
  return out;
}

void PinThisThread(int core) {
  if (core < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

}  // namespace looptool::bench
