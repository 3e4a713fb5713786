// KernelTimer: compiles, verifies and times the kernel of a schedule. The environment asks it for
// the `flops`, `runtime` and `peak_gflops` observations; the server supplies one that runs
// kernels in isolated worker processes (backend/timing/worker_pool.h), benchmarks and tests one
// in their own process (backend/timing/local_timer.h) or a fake.
//
// Every implementation keeps one error contract, whatever runs the kernel:
//   RESOURCE_EXHAUSTED  the kernel is too large to generate, or too costly to run at all;
//   INTERNAL            the kernel could not be generated, failed verification against the
//                       interpreter, or crashed (schedules reach it through legal actions only,
//                       so each of these is a fault of ours, never the caller's);
//   DEADLINE_EXCEEDED   the kernel hung (ran past the timer's deadline);
//   UNAVAILABLE         nothing can run kernels now (no worker could be started, or the timer
//                       has stopped); not a verdict on the kernel.
// Implementations must be thread-safe.
#ifndef LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_
#define LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

struct Measurement {
  double seconds = 0;  // fastest single run of the kernel
  double gflops = 0;   // Program::Flops() / seconds / 1e9
  // How the timing ended, so that a reader can weigh the number (a search's shortcuts mostly
  // leave readings of slow kernels low):
  //   kFull       the fixed budget (or its run cap) spent;
  //   kSettled    adaptive: the runs stopped once their minimum settled;
  //   kConfirmed  adaptive, then timed again with the fixed budget (a candidate within a
  //               margin of the program's best, or faster): the faster minimum counts;
  //   kSlower     adaptive: the runs stopped once their minimum was clearly slower than the
  //               program's best (a few runs: a stall in them is kept);
  //   kOnce       timed once: its first run was far slower than the best;
  //   kUntimed    not timed: its verification run (cold) was far slower than the best, and
  //               that run's time is the measurement.
  //   kAbandoned  not timed nor verified: its verification run was abandoned when it had run
  //               (on the CPU) many times as long as the best kernel; the measurement is that
  //               limit, so its GFLOPS are an upper bound (the kernel is slower still).
  enum class Timing { kFull, kSettled, kConfirmed, kSlower, kOnce, kUntimed, kAbandoned };
  Timing timing = Timing::kFull;
  int64_t timed_runs = 0;  // runs timed (0 for kUntimed and kAbandoned; kConfirmed: both's runs)
  // RemeasureFor only: the FMA peak measured on the same core right after the kernel's timing,
  // at the clock the kernel ran at (the boost clock moves under sustained load, so a peak
  // measured at start-up is not the one to divide by); 0 when not measured.
  double peak_gflops = 0;
  // What measuring the schedule took its worker when it was measured (a cached measurement
  // keeps it): compilation, verification and the timing runs (RemeasureFor: compilation, the
  // runs and the peak beside them); not the program's reference run and buffers (made once per
  // program on each worker, again after the worker evicts it), nor any wait for a worker.
  // 0 where not known.
  double work_seconds = 0;
};

// "full", "settled", "confirmed", "slower", "once", "untimed" or "abandoned"; TimingFromName()
// reads them back (nullopt for any other text).
const char* TimingName(Measurement::Timing timing);
std::optional<Measurement::Timing> TimingFromName(absl::string_view name);

// One level of the host's memory hierarchy as the timed core sees it: "L1", "L2", "L3" (data or
// unified caches, from the kernel's sysfs) and "DRAM" last.
struct MemoryLevel {
  std::string name;
  int64_t bytes = 0;  // capacity; 0 for DRAM (no bound)
};

// The bandwidth the code generator's vector loads (and stores) reach over `bytes` of buffers,
// gone over again and again (backend/timing/bandwidth.h): of a read, the bytes read per second;
// of a copy (half the bytes read, half written), the bytes read and written per second; of a
// fill, the bytes written per second.
struct BandwidthPoint {
  int64_t bytes = 0;
  double gbytes_per_second = 0;  // 1e9 bytes per second
};

// The memory of the core kernels are timed on: its levels and its bandwidth curve (buffers of
// doubling size, from within L1 to past the last cache). A level's capacity is not all of it a
// kernel gets (a VM's share of a shared L3 is smaller, a working set just past L2 still hits
// in L2), so the bound of a working set reads the curve, not the level.
struct MemoryProfile {
  std::vector<MemoryLevel> levels;        // smallest first, DRAM (bytes 0) last
  std::vector<BandwidthPoint> bandwidth;  // reads; increasing bytes
  // Copies (the faster of regular and non-temporal stores), increasing bytes; may end below the
  // read curve's last point or be empty (no copy was measured).
  std::vector<BandwidthPoint> copy_bandwidth;
  // Fills (stores only, of one value; the faster of regular and non-temporal stores), in bytes
  // written per second; like the copy curve, may end early or be empty.
  std::vector<BandwidthPoint> fill_bandwidth;

  // The smallest level whose capacity holds `bytes`; DRAM when none does.
  const MemoryLevel& LevelOf(int64_t bytes) const {
    for (const MemoryLevel& level : levels) {
      if (level.bytes >= bytes) return level;
    }
    return levels.back();
  }
  // The bandwidth over `bytes`: the point of the largest buffer not larger (the first point for
  // less than every buffer), raised to the fastest point of any larger buffer. The true
  // bandwidth falls as buffers grow, and a measurement is never above it, so a larger buffer's
  // point is a floor for every smaller working set: a curve measured with a dip (seen: 194 GB/s
  // at 256 KiB between 254 at 128 KiB and 259 at 512 KiB) must not put the bound below what a
  // kernel reaches. This is never below the bandwidth a working set of `bytes` gets.
  double BandwidthOf(int64_t bytes) const { return CurveAt(bandwidth, bytes); }
  // The copy curve read the same way (0 when it is empty). Past its last point a working set
  // takes that point's bandwidth, which a larger one never exceeds.
  double CopyBandwidthOf(int64_t bytes) const { return CurveAt(copy_bandwidth, bytes); }
  // The fill curve read the same way (0 when it is empty).
  double FillBandwidthOf(int64_t bytes) const { return CurveAt(fill_bandwidth, bytes); }

 private:
  static double CurveAt(const std::vector<BandwidthPoint>& curve, int64_t bytes) {
    double gbps = 0;
    for (auto p = curve.rbegin(); p != curve.rend(); ++p) {
      gbps = std::max(gbps, p->gbytes_per_second);
      if (p->bytes <= bytes) break;
    }
    return gbps;
  }
};

class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  // The kernel of `tree`'s schedule, measured on behalf of `tenant` (whom the caller serves:
  // timers that queue requests serve tenants in turn). Implementations may cache by (program,
  // schedule).
  virtual absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) = 0;
  // The kernel timed again, now, with the full fixed budget and no cut-offs or cache (after a
  // first MeasureFor when there is none): a search's winners are re-timed so that the speed it
  // reports is not the luckiest of many measurements.
  virtual absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) = 0;
  // A hint that schedules of `tree`'s program will be measured soon (an episode on it has
  // begun): a timer may compute now, in the background, what every first measurement of the
  // program needs (its reference run), and the first measurement then waits less. Returns at
  // once, reports nothing and changes no measurement; timers may ignore it (this default does).
  virtual void PrepareFor(const LoopTree& tree, uint64_t tenant) {}
  // The single-core FMA peak (GFLOPS) rewards are normalised by, measured on the core kernels
  // are timed on. UNAVAILABLE when it could not be measured.
  virtual absl::StatusOr<double> PeakGflops() = 0;
  // The memory of the core kernels are timed on, its bandwidth measured once, at the first call
  // (about half a second). Levels end with DRAM and the curve is not empty. UNIMPLEMENTED for
  // timers that cannot measure it; UNAVAILABLE when it could not be measured.
  virtual absl::StatusOr<MemoryProfile> Memory() {
    return absl::UnimplementedError("this kernel timer does not measure memory bandwidth");
  }
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_
