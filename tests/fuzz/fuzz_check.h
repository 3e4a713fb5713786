// FUZZ_CHECK: a harness's assertion. On failure it prints the condition, its location and a
// message, then aborts, which libFuzzer reports as a crash and saves the input for.
#ifndef LOOPTOOL_TESTS_FUZZ_FUZZ_CHECK_H_
#define LOOPTOOL_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, message)                                                          \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n%s\n", __FILE__, __LINE__, #cond, \
                   std::string(message).c_str());                                          \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)

#endif  // LOOPTOOL_TESTS_FUZZ_FUZZ_CHECK_H_
