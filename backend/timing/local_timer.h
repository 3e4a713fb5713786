// LocalTimer: the KernelTimer that compiles, verifies and times schedules in this
// process, on this thread's core (KernelTimer's error contract: RESOURCE_EXHAUSTED for code too
// large, INTERNAL for a kernel that cannot be generated or fails verification). A schedule is compiled and checked against the reference
// interpreter the first time it is seen; its measurement is cached under (program, schedule),
// so cursor moves and revisited states cost nothing. Kernel workers run one each; benchmarks
// and tests use it directly. Thread-safe (calls are serialized: one core, one measurement).
#ifndef LOOPTOOL_BACKEND_TIMING_LOCAL_TIMER_H_
#define LOOPTOOL_BACKEND_TIMING_LOCAL_TIMER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "backend/codegen/codegen_options.h"
#include "backend/codegen/compile.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/verify.h"
#include "backend/env/kernel_timer.h"
#include "backend/timing/measure.h"
#include "backend/timing/measurement_cache.h"

namespace looptool {

class LocalTimer final : public KernelTimer {
 public:
  struct Options {
    Isa isa = Isa::kSse;
    CodegenOptions codegen;
    TimingOptions timing;                // fixed timing: about 10 ms of runs by default
    // Adaptive timing of new schedules (AdaptiveTiming, capped by timing.budget_seconds): runs
    // stop once the minimum settles, or once it is `clearly_slower_factor` times the program's
    // best; a schedule within `confirm_margin` of the best or faster (a candidate a search will
    // keep) is then timed again with the fixed `timing`, and the faster minimum counts.
    bool adaptive = true;
    double clearly_slower_factor = 1.25;
    double confirm_margin = 0.02;
    double peak_budget_seconds = 0.2;    // once, at the first PeakGflops(): the best of 5 rounds
    double bandwidth_budget_seconds = 0.5;  // the bandwidth curve, once, at the first Memory()
    size_t max_cached_schedules = 1 << 16;                  // measurements (MeasurementCache)...
    int64_t max_cached_schedule_bytes = int64_t{64} << 20;  // ... and their bytes
    size_t max_cached_programs = 64;     // reference runs and tensor buffers...
    int64_t max_cached_program_bytes = int64_t{256} << 20;  // ... and their bytes
    // A schedule whose first timed run is this many times slower than the fastest kernel of its
    // program measured so far is timed once (after warm-up); one whose verification run is, and
    // took at least `untimed_min_seconds` (a cold run of a kernel of microseconds pays for its
    // first touch of code and data, so only long runs are judged by it), is not timed: that
    // run's time is its measurement. Searches waste less time on bad schedules of slow
    // programs. 0 disables both.
    double give_up_factor = 4;
    double untimed_min_seconds = 1e-3;
    // A verification run still going after this many times the program's best kernel (and
    // `untimed_min_seconds`) of CPU time is abandoned (RunWithin: the kernel is not verified;
    // its measurement Timing::kAbandoned, with that limit as its seconds, not cached here nor by
    // a WorkerPool): on a Zen 5 host a 10 s search of a BERT-base matmul spent 4 of its seconds
    // on ~8 kernels of 1-3 GFLOPS where the best ran at 160. RemeasureFor never abandons (the
    // kernel it times is verified first). 0 disables.
    double abandon_factor = 16;
  };

  // What one new schedule cost; for benchmarks and the service's statistics.
  struct Stats {
    int64_t measured = 0;     // schedules compiled, verified and timed (or given up untimed)
    int64_t given_up = 0;     // of those, timed once or not at all for being far slower than the best
    int64_t untimed = 0;      // of those given up, not timed: the verification run's time counts
    int64_t abandoned = 0;    // of those untimed, the verification run abandoned (abandon_factor)
    int64_t stable = 0;       // adaptive: runs stopped once the minimum settled
    int64_t slower = 0;       // adaptive: runs stopped as clearly slower than the best
    int64_t confirmed = 0;    // adaptive: candidates timed again with the fixed budget
    int64_t cache_hits = 0;
    int64_t remeasured = 0;   // RemeasureFor timings (not in `measured`)
    int64_t references = 0;   // programs' reference runs computed (Measure's or Prepare's)
    int64_t beside_peaks = 0;  // peaks RemeasureFor measured (one serves a second of them)
    double compile_seconds = 0, verify_seconds = 0, timing_seconds = 0;
  };

  explicit LocalTimer(Options options);

  // Tenants are ignored: calls are served in the order they take the lock.
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override {
    return Measure(tree);
  }
  absl::StatusOr<Measurement> Measure(const LoopTree& tree);
  // Measure() first (compile, verify, cache), then a fresh timing with the fixed `timing`
  // options, which is returned and not cached, with the FMA peak measured right after it (or
  // by a re-timing of the second before).
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override;
  // Computes and caches `tree`'s program's reference run (and buffers) now, as its first
  // measurement would; nothing when it is cached. Returns the seconds it took (0 when cached);
  // they count in no measurement.
  // (PrepareFor, the KernelTimer hint, stays the default no-op: an in-process timer has no
  // background to run it in; kernel workers call this for WorkerPool::PrepareFor.)
  double Prepare(const LoopTree& tree);
  // Measured once, at the first call: the best of a few spaced rounds. UNAVAILABLE when no round
  // could run the peak kernel.
  absl::StatusOr<double> PeakGflops() override;
  // Measured once, at the first call, on the core this thread runs on (MeasureMemory within
  // `bandwidth_budget_seconds`).
  absl::StatusOr<MemoryProfile> Memory() override;
  Stats stats() const;
  // Bytes of the cached programs' reference runs and buffers.
  int64_t cached_program_bytes() const;

 private:
  struct ProgramData {
    ReferenceRun reference;
    TensorData scratch;  // the kernel's working buffers: reference inputs, scratch outputs
    int64_t last_use = 0;
    double best_seconds = 1e30;  // the fastest kernel of this program measured so far
    int64_t bytes = 0;           // of `reference` and `scratch`
  };
  ProgramData& ProgramFor(const LoopTree& tree) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Measure(), whose verification run may be abandoned (abandon_factor) or not.
  absl::StatusOr<Measurement> Measure(const LoopTree& tree, bool may_abandon);

  const Options options_;
  mutable absl::Mutex mu_;
  KernelCompiler compiler_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ProgramData>> programs_ ABSL_GUARDED_BY(mu_);
  MeasurementCache schedules_ ABSL_GUARDED_BY(mu_);
  double peak_gflops_ ABSL_GUARDED_BY(mu_) = 0;
  // RemeasureFor's peak beside the kernel, and when it was measured (MonotonicSeconds).
  static constexpr double kBesidePeakSeconds = 1.0;
  double beside_peak_ ABSL_GUARDED_BY(mu_) = 0;
  double beside_peak_at_ ABSL_GUARDED_BY(mu_) = -1e30;
  std::optional<MemoryProfile> memory_ ABSL_GUARDED_BY(mu_);  // once measured
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t program_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_LOCAL_TIMER_H_
