// The libraries a user would pick instead, run in the benchmark's process on one thread:
// OpenBLAS cblas_sgemm, oneDNN's matmul, convolution, pooling and reduction primitives, and
// plain -O3 loops. Each returns a callable that computes into the given buffers.
#ifndef LOOPTOOL_BENCH_REFERENCES_H_
#define LOOPTOOL_BENCH_REFERENCES_H_

#include <functional>
#include <string>

namespace looptool::bench {

struct Reference {
  std::function<void()> run;
  std::string implementation;  // what the library chose ("brg:avx512_core", "Cooperlake", ...)
};

// C[MxN] = A[MxK] * B[KxN], row-major.
Reference OpenBlasSgemm(int M, int N, int K, const float* A, const float* B, float* C);
Reference OneDnnMatmul(int M, int N, int K, const float* A, const float* B, float* C);
// O[K][H][W] = sum_c,r,s I[C][H+r][W+s] * W[K][C][r][s] (NCHW, batch 1, no padding).
Reference OneDnnConv(int C, int K, int H, int W, int R, const float* in, const float* w, float* out);
// O[C][H][W] = sum_r,s I[C][H+r][W+s] * W[C][r][s]: depthwise (groups = C, NCHW, batch 1).
Reference OneDnnDepthwise(int C, int H, int W, int R, const float* in, const float* w, float* out);
// The same convolutions (groups 1, or groups = C = K for depthwise) with every tensor in the
// layout oneDNN prefers (format `any`: blocked, nChw16c on AVX-512), zero-filled; the reorders
// into those layouts are not timed. The strongest oneDNN can do for the shape.
Reference OneDnnConvBlocked(int C, int K, int H, int W, int R, bool depthwise);
// O[H][W][C] = max_r,s I[2H+r][2W+s][C] (NHWC, batch 1, stride 2, R x R window).
Reference OneDnnMaxPool(int C, int H, int W, int R, const float* in, float* out);
// s[M] = sum_n A[M][N].
Reference OneDnnRowSum(int M, int N, const float* A, float* s);

// The same computations as plain loops compiled with -O3 -march=native.
Reference LoopMatmul(int M, int N, int K, const float* A, const float* B, float* C);
Reference LoopConv(int C, int K, int H, int W, int R, const float* in, const float* w, float* out);
Reference LoopMaxPool(int C, int H, int W, int R, const float* in, float* out);
Reference LoopRowSum(int M, int N, const float* A, float* s);

// The OpenBLAS core and oneDNN runtime in use, for the report.
std::string OpenBlasCore();
std::string OneDnnVersion();

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_REFERENCES_H_
