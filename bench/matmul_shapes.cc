#include "bench/matmul_shapes.h"

#include <sched.h>

#include <iterator>

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
  static const datasets::MatmulShape kShapes[] = {
      {37, 61, 97},   {127, 131, 139}, {100, 100, 100}, {53, 200, 311},
      {250, 70, 190}, {512, 32, 64},   {32, 512, 128},  {96, 384, 48},
      {199, 211, 223}, {300, 300, 45}, {64, 450, 333},  {481, 97, 257},
  };
  std::vector<Shape> out;
  for (int i = 0; i < count && i < static_cast<int>(std::size(kShapes)); ++i) {
    out.push_back({kShapes[i], true});
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
