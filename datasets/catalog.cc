#include "datasets/catalog.h"

#include <cstdio>

#include "datasets/model_datasets.h"
#include "util/check.h"

namespace looptool::datasets {
namespace {

constexpr char kConv[] = "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]";
constexpr char kConvS2[] = "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]";
constexpr char kPointwise[] = "O[k,h,w] += I[c,h,w] * W[k,c]";
constexpr char kDepthwise[] = "O[c,h,w] += I[c, h+r, w+s] * W[c,r,s]";
constexpr char kDepthwiseS2[] = "O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]";
constexpr char kMaxPool[] = "O[c,h,w] max= I[c, 2*h+r, 2*w+s]";
constexpr char kMaxPoolNhwc[] = "O[h,w,c] max= I[2*h+r, 2*w+s, c]";
constexpr char kMatmulRelu[] = "C[m,n] += A[m,k] * B[k,n] -> relu";

CatalogBenchmark B(std::string name, const std::string& statement, const std::string& sizes) {
  return {std::move(name), statement + "\n" + sizes + "\n"};
}

std::vector<CatalogDataset> Build() {
  return {
      {"conv2d-v0",
       "Convolutions of common CNN layers (one image, CHW): ResNet-18's 3x3 stages and stem, "
       "1x1 pointwise, MobileNet's depthwise 3x3 (stride 1 and 2), and LoopTune's 2-D conv",
       {
           B("resnet18_conv1_7x7s2", kConvS2, "k=64 h=112 w=112 c=3 r=7 s=7"),
           B("resnet18_conv2_3x3", kConv, "k=64 h=56 w=56 c=64 r=3 s=3"),
           B("resnet18_conv3_3x3", kConv, "k=128 h=28 w=28 c=128 r=3 s=3"),
           B("resnet18_conv3_3x3s2", kConvS2, "k=128 h=28 w=28 c=64 r=3 s=3"),
           B("resnet18_conv4_3x3", kConv, "k=256 h=14 w=14 c=256 r=3 s=3"),
           B("resnet18_conv5_3x3", kConv, "k=512 h=7 w=7 c=512 r=3 s=3"),
           B("resnet50_pointwise_256_64", kPointwise, "k=64 h=56 w=56 c=256"),
           B("mobilenet_pointwise_64_128", kPointwise, "k=128 h=56 w=56 c=64"),
           B("mobilenet_depthwise_32_112", kDepthwise, "c=32 h=112 w=112 r=3 s=3"),
           B("mobilenet_depthwise_64_56s2", kDepthwiseS2, "c=64 h=56 w=56 r=3 s=3"),
           B("mobilenet_depthwise_128_56", kDepthwise, "c=128 h=56 w=56 r=3 s=3"),
           B("mobilenet_depthwise_256_28", kDepthwise, "c=256 h=28 w=28 r=3 s=3"),
           B("mobilenet_depthwise_512_14", kDepthwise, "c=512 h=14 w=14 r=3 s=3"),
           B("looptune_conv2d_128_3x3", "O[r,c] += I[r+kr, c+kc] * W[kr,kc]",
             "r=128 c=128 kr=3 kc=3"),
       }},
      {"pool-v0",
       "Max pooling (CHW and HWC, 2x2 and 3x3 windows, stride 2) and a global sum pool",
       {
           B("resnet_maxpool_3x3s2_64_56", kMaxPool, "c=64 h=56 w=56 r=3 s=3"),
           B("vgg_maxpool_2x2s2_128_56", kMaxPool, "c=128 h=56 w=56 r=2 s=2"),
           B("maxpool_nhwc_3x3s2_64_56", kMaxPoolNhwc, "h=56 w=56 c=64 r=3 s=3"),
           B("maxpool_nhwc_2x2s2_256_28", kMaxPoolNhwc, "h=28 w=28 c=256 r=2 s=2"),
           B("maxpool2d_3x3s2_128", "O[r,c] max= I[2*r+kr, 2*c+kc]", "r=128 c=128 kr=3 kc=3"),
           B("global_sumpool_512_7", "O[c] += I[c,h,w]", "c=512 h=7 w=7"),
       }},
      {"reduce-v0",
       "Reductions: row and column sums and maxima, a batch sum, GEMV and GEVM",
       {
           B("rowsum_1024_1024", "O[r] += I[r,c]", "r=1024 c=1024"),
           B("colsum_1024_1024", "O[c] += I[r,c]", "r=1024 c=1024"),
           B("rowmax_512_2048", "O[r] max= I[r,c]", "r=512 c=2048"),
           B("batchsum_64_64_256", "O[c,w] += I[b,c,w]", "b=64 c=64 w=256"),
           B("gemv_1024_1024", "y[m] += A[m,k] * x[k]", "m=1024 k=1024"),
           B("gevm_1024_1024", "y[n] += x[k] * A[k,n]", "k=1024 n=1024"),
       }},
      {"transpose-v0",
       "Transposes and layout changes (matrix transposes, CHW <-> HWC)",
       {
           B("transpose_256_256", "B[n,m] = A[m,n]", "m=256 n=256"),
           B("transpose_512_1024", "B[n,m] = A[m,n]", "m=512 n=1024"),
           B("transpose_1024_512", "B[n,m] = A[m,n]", "m=1024 n=512"),
           B("hwc_to_chw_56_56_64", "B[c,h,w] = A[h,w,c]", "h=56 w=56 c=64"),
           B("chw_to_hwc_64_56_56", "B[h,w,c] = A[c,h,w]", "c=64 h=56 w=56"),
       }},
      {"elementwise-v0",
       "Broadcast, concatenation and elementwise sums with a fused relu",
       {
           B("broadcast_rows_512_1024", "B[m,n] = a[n]", "m=512 n=1024"),
           B("concat_cols_256_512_512", "C[m,a] = A[m,a]\nC[m,b+512] = B[m,b]", "m=256 a=512 b=512"),
           B("add_relu_512_1024", "C[m,n] = A[m,n] + B[m,n] -> relu", "m=512 n=1024"),
       }},
      {"mm_relu-v0",
       "Matmuls with a fused relu, shaped like MLP and transformer feed-forward layers",
       {
           B("mlp_64_256_256", kMatmulRelu, "m=64 n=256 k=256"),
           B("mlp_128_512_256", kMatmulRelu, "m=128 n=512 k=256"),
           B("mlp_32_1024_512", kMatmulRelu, "m=32 n=1024 k=512"),
           B("ffn_128_768_768", kMatmulRelu, "m=128 n=768 k=768"),
           B("ffn_64_3072_768", kMatmulRelu, "m=64 n=3072 k=768"),
           B("head_256_128_512", kMatmulRelu, "m=256 n=128 k=512"),
       }},
  };
}

}  // namespace

const std::vector<CatalogDataset>& Catalog() {
  static const std::vector<CatalogDataset>* const catalog = [] {
    auto* all = new std::vector<CatalogDataset>(Build());
    for (const ModelDatasetText& file : ModelDatasetTexts()) {
      absl::StatusOr<CatalogDataset> d = ParseModelDataset(file.name, file.text);
      // The files are generated and tested (tests/datasets/registry_test): a bad one is ours.
      if (!d.ok()) std::fprintf(stderr, "%s\n", d.status().ToString().c_str());
      LT_CHECK(d.ok());
      all->push_back(*std::move(d));
    }
    return all;
  }();
  return *catalog;
}

}  // namespace looptool::datasets
