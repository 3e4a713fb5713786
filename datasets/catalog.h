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
  int weight = 1;       // how many layers of its model it stands for (model datasets)
  std::string reference;  // how PyTorch computes it (model datasets; datasets/models/generate.py)
};

struct CatalogDataset {
  std::string name;  // "conv2d-v0"
  std::string description;
  std::vector<CatalogBenchmark> benchmarks;
  bool evaluation_only = false;  // every benchmark in the test split (the model datasets)
};

// Every catalog dataset, in a fixed order: the hand-written ones, then the model datasets
// (datasets/model_datasets.h).
const std::vector<CatalogDataset>& Catalog();

}  // namespace looptool::datasets

#endif  // LOOPTOOL_DATASETS_CATALOG_H_
