// LT_CHECK: invariants of our own code. A failure is our bug, never the user's: it prints the
// condition and location and aborts. User input is validated with absl::Status instead.
#ifndef LOOPTOOL_UTIL_CHECK_H_
#define LOOPTOOL_UTIL_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define LT_CHECK(cond)                                                                  \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: internal check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (false)

#endif  // LOOPTOOL_UTIL_CHECK_H_
