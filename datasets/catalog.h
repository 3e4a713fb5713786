// The small fixed datasets beside LoopTune's matmuls, so that every primitive of the language can
// be tuned: convolutions from common CNN layers (depthwise and strided included), pooling,
// reductions, transposes, and matmuls with a fused relu. Each benchmark is a name and a program.
#ifndef LOOPTOOL_DATASETS_CATALOG_H_
#define LOOPTOOL_DATASETS_CATALOG_H_

#include <string>
#include <vector>

namespace looptool::datasets {

struct CatalogBenchmark {
  std::string name;     // "resnet18_conv3x3_64"
  std::string program;  // in the loop-nest language
};

struct CatalogDataset {
  std::string name;  // "conv2d-v0"
  std::string description;
  std::vector<CatalogBenchmark> benchmarks;
};

// Every catalog dataset, in a fixed order.
const std::vector<CatalogDataset>& Catalog();

}  // namespace looptool::datasets

#endif  // LOOPTOOL_DATASETS_CATALOG_H_
