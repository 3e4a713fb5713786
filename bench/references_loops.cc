// Plain loops, the way a user would write them, compiled -O3 -march=native (see BUILD).
#include <algorithm>
#include <cstring>
#include <limits>

#include "bench/references.h"

namespace looptool::bench {

Reference LoopMatmul(int M, int N, int K, const float* A, const float* B, float* C) {
  return {[=] {
            std::memset(C, 0, sizeof(float) * M * N);
            for (int m = 0; m < M; ++m) {
              for (int k = 0; k < K; ++k) {
                const float a = A[m * K + k];
                for (int n = 0; n < N; ++n) C[m * N + n] += a * B[k * N + n];
              }
            }
          },
          "i-k-j loop"};
}

Reference LoopConv(int C, int K, int H, int W, int R, const float* in, const float* w, float* out) {
  const int IH = H + R - 1, IW = W + R - 1;
  return {[=] {
            std::memset(out, 0, sizeof(float) * K * H * W);
            for (int k = 0; k < K; ++k) {
              for (int c = 0; c < C; ++c) {
                for (int r = 0; r < R; ++r) {
                  for (int s = 0; s < R; ++s) {
                    const float wv = w[((k * C + c) * R + r) * R + s];
                    for (int h = 0; h < H; ++h) {
                      const float* row = in + (c * IH + h + r) * IW + s;
                      float* o = out + (k * H + h) * W;
                      for (int x = 0; x < W; ++x) o[x] += wv * row[x];
                    }
                  }
                }
              }
            }
          },
          "k-c-r-s-h-w loop"};
}

Reference LoopMaxPool(int C, int H, int W, int R, const float* in, float* out) {
  const int IW = 2 * (W - 1) + R;
  return {[=] {
            for (int h = 0; h < H; ++h) {
              for (int x = 0; x < W; ++x) {
                float* o = out + (h * W + x) * C;
                for (int c = 0; c < C; ++c) o[c] = -std::numeric_limits<float>::infinity();
                for (int r = 0; r < R; ++r) {
                  for (int s = 0; s < R; ++s) {
                    const float* i = in + ((2 * h + r) * IW + 2 * x + s) * C;
                    for (int c = 0; c < C; ++c) o[c] = std::max(o[c], i[c]);
                  }
                }
              }
            }
          },
          "h-w-r-s-c loop"};
}

Reference LoopRowSum(int M, int N, const float* A, float* s) {
  return {[=] {
            for (int m = 0; m < M; ++m) {
              float acc = 0;
              for (int n = 0; n < N; ++n) acc += A[m * N + n];
              s[m] = acc;
            }
          },
          "m-n loop"};
}

}  // namespace looptool::bench
