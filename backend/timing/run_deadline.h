// RunWithin: a call abandoned once it has run too long, for a JIT-compiled kernel's one run.
//
// A kernel far slower than the best of its program (a matmul's untiled k loop innermost: 1
// GFLOPS where the best runs at 200) would take its worker hundreds of milliseconds for a
// verification run whose only use is to say "far slower". RunWithin arms a timer of the calling
// thread (a POSIX timer that signals that thread alone); when it fires and the thread has used
// `seconds` of CPU time since `fn` began (time it spent descheduled does not count: the timer
// waits for the rest), the signal's handler jumps out of `fn` (siglongjmp) back into RunWithin,
// which returns false. So an abandoned `fn` ran on the CPU for `seconds` at least.
//
// Preconditions, which a JIT-compiled kernel's run meets and little else does:
//   1. `fn` takes no lock, allocates nothing, throws nothing and holds nothing that must be
//      released: the jump skips whatever it was doing.
//   2. The caller treats whatever `fn` wrote as garbage when it was abandoned.
//   3. Between RunWithin and `fn`'s own code, no frame has a destructor to run.
// The signal (SIGRTMIN + 3) is unblocked while `fn` runs and the caller's mask restored after.
// Where the timer cannot be made (a platform without per-thread POSIX timers), `fn` runs to its
// end and RunWithin returns true. Thread-safe: each call has its own timer and jump target.
#ifndef LOOPTOOL_BACKEND_TIMING_RUN_DEADLINE_H_
#define LOOPTOOL_BACKEND_TIMING_RUN_DEADLINE_H_

namespace looptool {

// Calls fn(arg) on this thread; true where it returned within `seconds` (> 0), false where it
// was abandoned then.
bool RunWithin(double seconds, void (*fn)(void*), void* arg);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_RUN_DEADLINE_H_
