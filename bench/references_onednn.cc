#include <cstring>
#include <memory>

#include "bench/references.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace looptool::bench {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Engine, stream and memories kept alive by the returned closure.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

Reference Wrap(std::shared_ptr<Context> ctx, dnnl::primitive prim,
               std::unordered_map<int, dnnl::memory> args, std::string impl) {
  return {[ctx, prim, args]() mutable {
            prim.execute(ctx->stream, args);
            ctx->stream.wait();
          },
          std::move(impl)};
}

}  // namespace

Reference OneDnnMatmul(int M, int N, int K, const float* A, const float* B, float* C) {
  auto ctx = std::make_shared<Context>();
  const dnnl::memory::desc a({M, K}, dt::f32, tag::ab), b({K, N}, dt::f32, tag::ab),
      c({M, N}, dt::f32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), ctx->engine);
  return Wrap(ctx, dnnl::matmul(pd),
              {{DNNL_ARG_SRC, dnnl::memory(a, ctx->engine, const_cast<float*>(A))},
               {DNNL_ARG_WEIGHTS, dnnl::memory(b, ctx->engine, const_cast<float*>(B))},
               {DNNL_ARG_DST, dnnl::memory(c, ctx->engine, C)}},
              pd.impl_info_str());
}

namespace {

// A stride-1 unpadded direct convolution in NCHW, OIHW (or GOIHW with one group per channel).
Reference NchwConv(int C, int K, int H, int W, int R, bool depthwise, const float* in,
                   const float* w, float* out) {
  auto ctx = std::make_shared<Context>();
  const dnnl::memory::desc src({1, C, H + R - 1, W + R - 1}, dt::f32, tag::nchw),
      wei(depthwise ? dnnl::memory::desc({C, 1, 1, R, R}, dt::f32, tag::goihw)
                    : dnnl::memory::desc({K, C, R, R}, dt::f32, tag::oihw)),
      dst({1, K, H, W}, dt::f32, tag::nchw);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, wei, dst, {1, 1},
                                      {0, 0}, {0, 0}),
      ctx->engine);
  return Wrap(ctx, dnnl::convolution_forward(pd),
              {{DNNL_ARG_SRC, dnnl::memory(src, ctx->engine, const_cast<float*>(in))},
               {DNNL_ARG_WEIGHTS, dnnl::memory(wei, ctx->engine, const_cast<float*>(w))},
               {DNNL_ARG_DST, dnnl::memory(dst, ctx->engine, out)}},
              pd.impl_info_str());
}

}  // namespace

Reference OneDnnConv(int C, int K, int H, int W, int R, const float* in, const float* w, float* out) {
  return NchwConv(C, K, H, W, R, /*depthwise=*/false, in, w, out);
}

Reference OneDnnDepthwise(int C, int H, int W, int R, const float* in, const float* w,
                          float* out) {
  return NchwConv(C, C, H, W, R, /*depthwise=*/true, in, w, out);
}

Reference OneDnnConvBlocked(int C, int K, int H, int W, int R, bool depthwise) {
  auto ctx = std::make_shared<Context>();
  const dnnl::memory::desc src({1, C, H + R - 1, W + R - 1}, dt::f32, tag::any),
      wei(depthwise ? dnnl::memory::dims{C, 1, 1, R, R} : dnnl::memory::dims{K, C, R, R}, dt::f32,
          tag::any),
      dst({1, K, H, W}, dt::f32, tag::any);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, wei, dst, {1, 1},
                                      {0, 0}, {0, 0}),
      ctx->engine);
  const auto zeroed = [&](const dnnl::memory::desc& d) {
    dnnl::memory m(d, ctx->engine);
    std::memset(m.get_data_handle(), 0, d.get_size());
    return m;
  };
  return Wrap(ctx, dnnl::convolution_forward(pd),
              {{DNNL_ARG_SRC, zeroed(pd.src_desc())},
               {DNNL_ARG_WEIGHTS, zeroed(pd.weights_desc())},
               {DNNL_ARG_DST, zeroed(pd.dst_desc())}},
              pd.impl_info_str());
}

Reference OneDnnMaxPool(int C, int H, int W, int R, const float* in, float* out) {
  auto ctx = std::make_shared<Context>();
  const dnnl::memory::desc src({1, C, 2 * (H - 1) + R, 2 * (W - 1) + R}, dt::f32, tag::nhwc),
      dst({1, C, H, W}, dt::f32, tag::nhwc);
  const dnnl::pooling_forward::primitive_desc pd(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                  dnnl::algorithm::pooling_max, src, dst, {2, 2}, {R, R}, {0, 0},
                                  {0, 0}),
      ctx->engine);
  return Wrap(ctx, dnnl::pooling_forward(pd),
              {{DNNL_ARG_SRC, dnnl::memory(src, ctx->engine, const_cast<float*>(in))},
               {DNNL_ARG_DST, dnnl::memory(dst, ctx->engine, out)}},
              pd.impl_info_str());
}

Reference OneDnnRowSum(int M, int N, const float* A, float* s) {
  auto ctx = std::make_shared<Context>();
  const dnnl::memory::desc src({M, N}, dt::f32, tag::ab), dst({M, 1}, dt::f32, tag::ab);
  const dnnl::reduction::primitive_desc pd(
      dnnl::reduction::desc(dnnl::algorithm::reduction_sum, src, dst, 0.f, 0.f), ctx->engine);
  return Wrap(ctx, dnnl::reduction(pd),
              {{DNNL_ARG_SRC, dnnl::memory(src, ctx->engine, const_cast<float*>(A))},
               {DNNL_ARG_DST, dnnl::memory(dst, ctx->engine, s)}},
              pd.impl_info_str());
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + (v->cpu_runtime == DNNL_RUNTIME_OMP ? " (OpenMP)" : "");
}

}  // namespace looptool::bench
