// stride2_pool_micro: hand-written AVX-512 forms of a CHW 3 x 3 stride-2 max pool
// (O[r,c] max= I[2r+kr, 2c+kc], the catalog's pool-v0/maxpool2d_3x3s2_128 and smaller), each
// checked against a scalar loop and timed (fastest of 7 repetitions of 0.1 s of calls), beside
// a sequential read of the input (the bandwidth floor). They bound what the code generator can
// gain on this op: see bench/results/zen5/stride2_pool_micro.md.
//
//   bazel build -c opt //bench:stride2_pool_micro
//   taskset -c 1 bazel-bin/bench/stride2_pool_micro [input_row_floats=257] [output_rows=128]
//
// Forms (per vector of 16 outputs, for each of the 3 input rows unless said):
//   pairs      two loads of the 32-float span, two loads of the span 2 floats on (column tap 2),
//              rows folded by max before the even / odd permutes (3 permutes);
//   unfolded   the same loads, every tap permuted before its max (9 permutes);
//   shifted    two loads of the span, rows folded, even and odd permutes; tap 2 is the next
//              vector's even phase shifted in by one lane (valignd): 6 loads, 3 shuffles;
//   shifted2   shifted over two output rows at once (the shared input row loaded once).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Pool {
  int in_width = 257, out_rows = 128;
  static constexpr int kOutWidth = 128;
  std::vector<float> storage;
  float* in = nullptr;
  std::vector<float> out;
  __m512i even, odd;

  Pool(int width, int rows) : in_width(width), out_rows(rows) {
    storage.resize(static_cast<size_t>(2 * rows + 1) * width + 64);
    in = storage.data() + ((64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64) / 4;
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> u(-1, 1);
    for (size_t i = 0; i < static_cast<size_t>(2 * rows + 1) * width; ++i) in[i] = u(rng);
    out.resize(static_cast<size_t>(rows) * kOutWidth);
    alignas(64) int e[16], o[16];
    for (int i = 0; i < 16; ++i) {
      e[i] = 2 * i;
      o[i] = 2 * i + 1;
    }
    even = _mm512_load_si512(e);
    odd = _mm512_load_si512(o);
  }
  const float* Row(int r) const { return in + static_cast<size_t>(r) * in_width; }
  float Expected(int r, int c) const {
    float m = -1e30f;
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) m = std::max(m, Row(2 * r + a)[2 * c + b]);
    }
    return m;
  }
  // max over the three rows of the 16 floats at column q.
  static __m512 Max3(const float* a, const float* b, const float* c, int q) {
    return _mm512_max_ps(_mm512_max_ps(_mm512_loadu_ps(a + q), _mm512_loadu_ps(b + q)),
                         _mm512_loadu_ps(c + q));
  }
  // The index tables as locals of each form: __m512i may alias the floats stored, so a member
  // would be reloaded after every store.
  struct Permutes {
    __m512i even, odd;
    __m512 Even(__m512 lo, __m512 hi) const { return _mm512_permutex2var_ps(lo, even, hi); }
    __m512 Odd(__m512 lo, __m512 hi) const { return _mm512_permutex2var_ps(lo, odd, hi); }
  };
  static __m512 ShiftIn(__m512 next, __m512 cur) {  // cur[1..15], next[0]
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(next), _mm512_castps_si512(cur), 1));
  }

  void Pairs() {
    const Permutes P{even, odd};
    float* o = out.data();
    for (int r = 0; r < out_rows; ++r) {
      const float *a = Row(2 * r), *b = Row(2 * r + 1), *c = Row(2 * r + 2);
      for (int j = 0; j < kOutWidth / 16; ++j) {
        const int q = 32 * j;
        const __m512 lo = Max3(a, b, c, q), hi = Max3(a, b, c, q + 16);
        const __m512 lo2 = Max3(a, b, c, q + 2), hi2 = Max3(a, b, c, q + 18);
        const __m512 m =
            _mm512_max_ps(_mm512_max_ps(P.Even(lo, hi), P.Odd(lo, hi)), P.Even(lo2, hi2));
        _mm512_storeu_ps(o + r * kOutWidth + 16 * j, m);
      }
    }
  }
  void Unfolded() {
    const Permutes P{even, odd};
    float* o = out.data();
    for (int r = 0; r < out_rows; ++r) {
      for (int j = 0; j < kOutWidth / 16; ++j) {
        __m512 acc = _mm512_set1_ps(-1e30f);
        for (int kr = 0; kr < 3; ++kr) {
          const float* p = Row(2 * r + kr) + 32 * j;
          const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
          const __m512 lo2 = _mm512_loadu_ps(p + 2), hi2 = _mm512_loadu_ps(p + 18);
          acc = _mm512_max_ps(acc, P.Even(lo, hi));
          acc = _mm512_max_ps(acc, P.Odd(lo, hi));
          acc = _mm512_max_ps(acc, P.Even(lo2, hi2));
        }
        _mm512_storeu_ps(o + r * kOutWidth + 16 * j, acc);
      }
    }
  }
  // One output row from rows a, b, c by the shifted form.
  static void ShiftedRow(const Permutes& P, const float* a, const float* b, const float* c,
                         float* o) {
    __m512 lo = Max3(a, b, c, 0), hi = Max3(a, b, c, 16);
    __m512 e = P.Even(lo, hi), d = P.Odd(lo, hi);
    for (int j = 0; j < kOutWidth / 16; ++j) {
      if (j + 1 < kOutWidth / 16) {
        const int q = 32 * (j + 1);
        lo = Max3(a, b, c, q);
        hi = Max3(a, b, c, q + 16);
        const __m512 en = P.Even(lo, hi), dn = P.Odd(lo, hi);
        _mm512_storeu_ps(o + 16 * j, _mm512_max_ps(_mm512_max_ps(e, d), ShiftIn(en, e)));
        e = en;
        d = dn;
      } else {  // the last vector: no next span; its tap 2 loaded as a span of its own
        const int q = 32 * j + 2;
        const __m512 e2 = P.Even(Max3(a, b, c, q), Max3(a, b, c, q + 16));
        _mm512_storeu_ps(o + 16 * j, _mm512_max_ps(_mm512_max_ps(e, d), e2));
      }
    }
  }
  void Shifted() {
    const Permutes P{even, odd};
    for (int r = 0; r < out_rows; ++r) {
      ShiftedRow(P, Row(2 * r), Row(2 * r + 1), Row(2 * r + 2), &out[r * kOutWidth]);
    }
  }
  void Shifted2() {  // two output rows per pass: their shared input row is read back from L1
    const Permutes P{even, odd};
    for (int r = 0; r + 1 < out_rows; r += 2) {
      ShiftedRow(P, Row(2 * r), Row(2 * r + 1), Row(2 * r + 2), &out[r * kOutWidth]);
      ShiftedRow(P, Row(2 * r + 2), Row(2 * r + 3), Row(2 * r + 4), &out[(r + 1) * kOutWidth]);
    }
  }
  float Read() const {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    const size_t n = static_cast<size_t>(2 * out_rows + 1) * in_width;
    for (size_t i = 0; i + 32 <= n; i += 32) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(in + i));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(in + i + 16));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  }
};

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename F>
double Fastest(F&& call) {
  for (int i = 0; i < 200; ++i) call();
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    const double start = Seconds();
    int n = 0;
    do {
      call();
      ++n;
    } while (Seconds() - start < 0.1);
    best = std::min(best, (Seconds() - start) / n);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "stride2_pool_micro: this CPU has no AVX-512\n");
    return 2;
  }
  // A whole decimal argument within [low, high], or `fallback` when absent; -1 when bad.
  auto arg = [&](int i, long fallback, long low, long high) -> long {
    if (argc <= i) return fallback;
    char* end = nullptr;
    const long v = std::strtol(argv[i], &end, 10);
    return (end == argv[i] || *end != '\0' || v < low || v > high) ? -1 : v;
  };
  const int width = static_cast<int>(arg(1, 257, 2 * Pool::kOutWidth + 1, 1 << 16));
  const int rows = static_cast<int>(arg(2, 128, 2, 1 << 12));
  if (argc > 3 || width < 0 || rows < 0 || rows % 2) {
    std::fprintf(stderr,
                 "usage: stride2_pool_micro [input_row_floats=257, 257..65536] "
                 "[output_rows=128, even, 2..4096]\n");
    return 2;
  }
  Pool p(width, rows);
  const double flops = 9.0 * rows * Pool::kOutWidth;
  const double bytes = 4.0 * ((2 * rows + 1) * (2 * Pool::kOutWidth + 1) + rows * Pool::kOutWidth);
  std::printf("input %d x %d floats (row of %d), output %d x %d: %.0f KiB moved\n", 2 * rows + 1,
              2 * Pool::kOutWidth + 1, width, rows, Pool::kOutWidth, bytes / 1024);
  volatile float sink = 0;
  const double read = Fastest([&] { sink = p.Read(); });
  std::printf("  %-9s %8.2f us  (the input read once, in order)\n", "read", read * 1e6);
  const struct {
    const char* name;
    void (Pool::*run)();
  } forms[] = {{"pairs", &Pool::Pairs},
               {"unfolded", &Pool::Unfolded},
               {"shifted", &Pool::Shifted},
               {"shifted2", &Pool::Shifted2}};
  int failed = 0;
  for (const auto& f : forms) {
    std::fill(p.out.begin(), p.out.end(), 0.f);
    const double t = Fastest([&] { (p.*f.run)(); });
    int wrong = 0;
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < Pool::kOutWidth; ++c) {
        wrong += p.out[r * Pool::kOutWidth + c] != p.Expected(r, c);
      }
    }
    failed += wrong > 0;
    std::printf("  %-9s %8.2f us  %6.1f GFLOPS  %s\n", f.name, t * 1e6, flops / t * 1e-9,
                wrong ? "WRONG" : "checked");
  }
  return failed ? 1 : 0;
}
