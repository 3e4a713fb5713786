#include <cblas.h>

#include "bench/references.h"

namespace looptool::bench {

Reference OpenBlasSgemm(int M, int N, int K, const float* A, const float* B, float* C) {
  openblas_set_num_threads(1);
  return {[=] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f,
                        C, N);
          },
          OpenBlasCore()};
}

std::string OpenBlasCore() { return openblas_get_corename(); }

}  // namespace looptool::bench
