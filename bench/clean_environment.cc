#include "bench/clean_environment.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace looptool::bench {

void ReexecWithCleanEnvironment(char** argv) {
  if (getenv("LOOPTOOL_BENCH_CLEAN")) return;
  for (const char* v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}) {
    if (const char* value = getenv(v)) std::printf("note: unsetting %s=%s for OpenBLAS\n", v, value);
    unsetenv(v);
  }
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("LOOPTOOL_BENCH_CLEAN", "1", 1);
  std::fflush(stdout);
  execv("/proc/self/exe", argv);
  std::perror("re-exec failed; OpenBLAS keeps the inherited environment");
}

}  // namespace looptool::bench
