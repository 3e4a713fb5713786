// split_loads: what a 16-lane load that spans two cache lines costs on this host, against the
// lane shifts that avoid it (the measurement behind BlockEmitter's stride-1 tap shifts,
// CodegenOptions::shift_unit_stride_taps). Hand-written AVX-512 kernels of a 3x3 max pool in CHW,
// 128 outputs a row, timed on one core (the fastest of 3000 rounds of 20 calls), checked against
// a scalar reference:
//   s1_loads   stride 1, each of the 9 taps a load (6 of them off the vector's alignment)
//   s1_shifts  stride 1, one load a row and vector, taps 1 and 2 shifted in (valignd)
//   s2_fold    stride 2, the window's rows folded as they lie in memory, then permuted (the
//              code generator's fold_L<p>): rows 257 floats wide, so most loads split
//   s2_aligned the same loads, rows 272 floats wide (every load aligned; not the same pool)
//
//   gcc -O3 -funroll-all-loops -mavx512f -o /tmp/split_loads bench/codegen/split_loads.c
//   taskset -c 1 /tmp/split_loads 16     # rows of output: 16 (L1) or 128 (L2)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OC 128  // outputs a row: 8 vectors
#define W1 130  // stride-1 input row
#define W2 257  // stride-2 input row
#define W2A 272

#define ALR(x1, x0, m) \
  _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(x1), _mm512_castps_si512(x0), m))

static __m512i EVEN, ODD;

static void s1_loads(float* O, const float* I, int rows) {
  for (int r = 0; r < rows; ++r) {
    __m512 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_set1_ps(-1e30f);
    for (int kr = 0; kr < 3; ++kr) {
      const float* a = I + (r + kr) * W1;
      for (int j = 0; j < 8; ++j)
        for (int kc = 0; kc < 3; ++kc) {
          acc[j] = _mm512_max_ps(acc[j], _mm512_loadu_ps(a + 16 * j + kc));
        }
    }
    for (int j = 0; j < 8; ++j) _mm512_storeu_ps(O + r * OC + 16 * j, acc[j]);
  }
}

static void s1_shifts(float* O, const float* I, int rows) {
  for (int r = 0; r < rows; ++r) {
    __m512 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_set1_ps(-1e30f);
    for (int kr = 0; kr < 3; ++kr) {
      const float* a = I + (r + kr) * W1;
      __m512 x0 = _mm512_loadu_ps(a);
      for (int j = 0; j < 8; ++j) {
        __m512 x1 = j < 7 ? _mm512_loadu_ps(a + 16 * (j + 1)) : _mm512_maskz_loadu_ps(0x3, a + 128);
        acc[j] = _mm512_max_ps(acc[j], x0);
        acc[j] = _mm512_max_ps(acc[j], ALR(x1, x0, 1));
        acc[j] = _mm512_max_ps(acc[j], ALR(x1, x0, 2));
        x0 = x1;
      }
    }
    for (int j = 0; j < 8; ++j) _mm512_storeu_ps(O + r * OC + 16 * j, acc[j]);
  }
}

static void s2(float* O, const float* I, int rows, int width) {
  for (int r = 0; r < rows; ++r) {
    const float* a = I + 2 * r * width;
    const float* b = a + width;
    const float* c = b + width;
    __m512 prev_even = _mm512_setzero_ps(), prev_acc = _mm512_setzero_ps();
    for (int j = 0; j <= 8; ++j) {
      const int d = j < 8 ? 32 * j : 32 * 7 + 2;  // the last: tap 2 of vector 7 from its own span
      __m512 lo = _mm512_max_ps(_mm512_max_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d)),
                                _mm512_loadu_ps(c + d));
      __m512 hi = _mm512_max_ps(
          _mm512_max_ps(_mm512_loadu_ps(a + d + 16), _mm512_loadu_ps(b + d + 16)),
          _mm512_loadu_ps(c + d + 16));
      __m512 even = _mm512_permutex2var_ps(lo, EVEN, hi);
      if (j == 8) {
        _mm512_storeu_ps(O + r * OC + 112, _mm512_max_ps(prev_acc, even));
        break;
      }
      __m512 acc = _mm512_max_ps(even, _mm512_permutex2var_ps(lo, ODD, hi));
      if (j > 0) {
        _mm512_storeu_ps(O + r * OC + 16 * (j - 1),
                         _mm512_max_ps(prev_acc, ALR(even, prev_even, 1)));
      }
      prev_even = even;
      prev_acc = acc;
    }
  }
}
static void s2_fold(float* O, const float* I, int rows) { s2(O, I, rows, W2); }
static void s2_aligned(float* O, const float* I, int rows) { s2(O, I, rows, W2A); }

static int check(void (*k)(float*, const float*, int), const float* I, int rows, int stride,
                 int width, float* O) {
  k(O, I, rows);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < OC; ++c) {
      float m = -1e30f;
      for (int kr = 0; kr < 3; ++kr)
        for (int kc = 0; kc < 3; ++kc) {
          const float v = I[(stride * r + kr) * width + stride * c + kc];
          m = v > m ? v : m;
        }
      if (O[r * OC + c] != m) return 0;
    }
  return 1;
}

static void bench(const char* name, void (*k)(float*, const float*, int), float* O,
                  const float* I, int rows, int stride, int width) {
  if (!check(k, I, rows, stride, width, O)) {
    printf("%s: WRONG\n", name);
    exit(1);
  }
  struct timespec a, b;
  double best = 1e9;
  for (int rep = 0; rep < 3000; ++rep) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 20; ++i) k(O, I, rows);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double t = ((b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec)) / 20;
    if (t < best) best = t;
  }
  printf("%-11s %3d rows  %6.2f ns a vector of outputs  %6.1f GFLOPS (9 a output)\n", name,
         rows, best * 1e9 / (rows * OC / 16), 9.0 * rows * OC / best * 1e-9);
}

int main(int argc, char** argv) {
  const int rows = argc > 1 ? atoi(argv[1]) : 16;
  EVEN = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  ODD = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int n = W2A * (2 * rows + 2) + 64;
  float* I = aligned_alloc(64, sizeof(float) * n);
  float* O = aligned_alloc(64, sizeof(float) * OC * rows);
  for (int i = 0; i < n; ++i) I[i] = (float)((i * 7919) % 1009) - 500;
  bench("s1_loads", s1_loads, O, I, rows, 1, W1);
  bench("s1_shifts", s1_shifts, O, I, rows, 1, W1);
  bench("s2_fold", s2_fold, O, I, rows, 2, W2);
  bench("s2_aligned", s2_aligned, O, I, rows, 2, W2A);
  return 0;
}
