// ReexecWithCleanEnvironment: OpenBLAS reads its environment when the library loads, and this
// machine sets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which make it pick a slow kernel. Benchmarks
// call this first in main(): the process runs itself again without the two variables and with
// every library on one thread (once; the second run sees LOOPTOOL_BENCH_CLEAN).
#ifndef LOOPTOOL_BENCH_CLEAN_ENVIRONMENT_H_
#define LOOPTOOL_BENCH_CLEAN_ENVIRONMENT_H_

namespace looptool::bench {

void ReexecWithCleanEnvironment(char** argv);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_CLEAN_ENVIRONMENT_H_
