/* export_timing: times one exported kernel from C, as the server's timer does (warm-up, then
 * single runs until the budget is spent; the fastest run), on one pinned core.
 *
 *   export_timing LIB.so SYMBOL CPU FLOPS ELEMENTS...   (one element count per tensor, by id)
 *
 * Prints `{"gflops": G, "runs": N, "min_seconds": S}`. Inputs are filled with small values;
 * tensor i starts 17 i cache lines past a page (modulo a page), where the server's timer places
 * it (backend/interp AllocateTensors): a kernel's speed depends on its tensors' places within
 * their pages; one of 4 MiB or more (its whole pages) lies, as there, in fresh pages mapped on a
 * 2 MiB boundary and advised as transparent huge pages before they are touched
 * (util/aligned_allocator.h). SYMBOL is a kernel's raw entry (NAME_tensors). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* util/aligned_allocator.h's (tests/python/kernels_test.py checks that they agree). */
enum { kHugeBytes = 4 << 20, kHugePage = 2 << 20 };

/* `bytes` (whole pages) for a tensor: util/aligned_allocator.h's rule. */
static char* allocate(size_t bytes) {
  if (bytes < kHugeBytes) return (char*)aligned_alloc(4096, bytes);
  bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  char* raw = mmap(NULL, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char* p = (char*)(((uintptr_t)raw + kHugePage - 1) / kHugePage * kHugePage);
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: export_timing LIB.so SYMBOL CPU FLOPS ELEMENTS...\n");
    return 2;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(atoi(argv[3]), &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) perror("sched_setaffinity");
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*kernel)(float* const*) = (void (*)(float* const*))dlsym(lib, argv[2]);
  if (kernel == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  const double flops = atof(argv[4]);
  const int n = argc - 5;
  float** tensors = calloc((size_t)n, sizeof(float*));
  for (int i = 0; i < n; ++i) {
    const size_t elements = (size_t)atoll(argv[5 + i]);
    const size_t offset = (size_t)i * 17 * 64 % 4096;
    const size_t bytes = (elements * sizeof(float) + offset + 4095) / 4096 * 4096;
    char* block = allocate(bytes);
    if (block == NULL) {
      fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
      return 1;
    }
    tensors[i] = (float*)(block + offset);
    for (size_t e = 0; e < elements; ++e) tensors[i][e] = (float)((e * 7) % 5) - 2.0f;
  }
  for (double end = now() + 0.2; now() < end;) kernel(tensors);
  double best = 1e30, spent = 0;
  long runs = 0;
  while (spent < 1.0 || runs < 10) {
    const double start = now();
    kernel(tensors);
    const double t = now() - start;
    spent += t;
    if (t < best) best = t;
    ++runs;
  }
  printf("{\"gflops\": %.4f, \"runs\": %ld, \"min_seconds\": %.9f}\n", flops / best / 1e9, runs,
         best);
  return 0;
}
