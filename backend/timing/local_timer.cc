#include "backend/timing/local_timer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backend/ir/printer.h"
#include "backend/schedule/ir_text.h"
#include "backend/timing/bandwidth.h"
#include "backend/timing/peak.h"
#include "backend/timing/run_deadline.h"

namespace looptool {

LocalTimer::LocalTimer(Options options)
    : options_(options),
      compiler_(options.isa, options.codegen),
      schedules_(options.max_cached_schedules, options.max_cached_schedule_bytes) {}

LocalTimer::ProgramData& LocalTimer::ProgramFor(const LoopTree& tree) {
  const std::string key = PrintProgram(tree.program());
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    auto data = std::make_unique<ProgramData>();
    data->reference = MakeReference(tree.program());
    ++stats_.references;
    data->scratch = data->reference.expected;
    for (const TensorData* tensors : {&data->reference.expected, &data->scratch}) {
      for (const auto& buffer : *tensors) {
        data->bytes += static_cast<int64_t>(buffer.get_allocator().BlockBytes(buffer.capacity()));
      }
    }
    // Least recently used programs go until the new one fits, in entries and in bytes (it stays
    // even when it alone is over: it is the one being measured).
    while (!programs_.empty() &&
           (programs_.size() >= options_.max_cached_programs ||
            program_bytes_ + data->bytes > options_.max_cached_program_bytes)) {
      auto oldest = programs_.begin();
      for (auto p = programs_.begin(); p != programs_.end(); ++p) {
        if (p->second->last_use < oldest->second->last_use) oldest = p;
      }
      program_bytes_ -= oldest->second->bytes;
      programs_.erase(oldest);
    }
    program_bytes_ += data->bytes;
    it = programs_.emplace(key, std::move(data)).first;
  }
  it->second->last_use = ++clock_;
  return *it->second;
}

double LocalTimer::Prepare(const LoopTree& tree) {
  absl::MutexLock lock(&mu_);
  const int64_t before = stats_.references;
  const double t0 = MonotonicSeconds();
  ProgramFor(tree);
  return stats_.references > before ? MonotonicSeconds() - t0 : 0.0;
}

int64_t LocalTimer::cached_program_bytes() const {
  absl::MutexLock lock(&mu_);
  return program_bytes_;
}

absl::StatusOr<Measurement> LocalTimer::Measure(const LoopTree& tree) {
  return Measure(tree, /*may_abandon=*/true);
}

absl::StatusOr<Measurement> LocalTimer::Measure(const LoopTree& tree, bool may_abandon) {
  absl::MutexLock lock(&mu_);
  const std::string key = absl::StrCat(PrintProgram(tree.program()), ScheduleKey(tree));
  if (const auto* cached = schedules_.Find(key); cached != nullptr) {
    ++stats_.cache_hits;
    return *cached;
  }

  ProgramData& program = ProgramFor(tree);
  const double t0 = MonotonicSeconds();
  absl::StatusOr<Kernel> kernel = compiler_.Compile(tree);
  const double t1 = MonotonicSeconds();
  double verify_run_seconds = 0;
  // The verification run, abandoned once it has run abandon_factor times the best.
  VerificationRun run;
  double limit = 0;
  if (may_abandon && options_.abandon_factor > 0 && program.best_seconds < 1e29) {
    limit = std::max(options_.untimed_min_seconds, options_.abandon_factor * program.best_seconds);
    run = [limit](const Kernel& k, float* const* tensors) {
      struct Call {
        const Kernel* kernel;
        float* const* tensors;
      } call{&k, tensors};
      const auto run_call = [](void* c) {
        static_cast<Call*>(c)->kernel->Run(static_cast<Call*>(c)->tensors);
      };
      return RunWithin(limit, run_call, &call);
    };
  }
  absl::Status verified = kernel.ok() ? VerifyKernel(*kernel, tree, program.reference,
                                                     program.scratch, &verify_run_seconds, run)
                                      : kernel.status();
  const double t2 = MonotonicSeconds();
  absl::StatusOr<Measurement> result = Measurement{};
  const double flops = static_cast<double>(tree.program().Flops());
  const bool abandoned = kernel.ok() && run && absl::IsDeadlineExceeded(verified);
  if (abandoned) {
    // It ran on the CPU for `limit` without finishing: the limit is its measurement, a speed it
    // is below (a search reads it as the best's / abandon_factor). Not verified, so not cached:
    // RemeasureFor verifies it.
    ++stats_.given_up;
    ++stats_.untimed;
    ++stats_.abandoned;
    // Its outputs half written (NaN where it had not come yet): the buffers made as a verified
    // run leaves them, for RemeasureFor, which times a cached kernel on them as they are.
    const TensorData& expected = program.reference.expected;
    for (size_t t = 0; t < std::min(program.scratch.size(), expected.size()); ++t) {
      const size_t n = std::min(program.scratch[t].size(), expected[t].size());
      std::copy(expected[t].begin(), expected[t].begin() + n, program.scratch[t].begin());
    }
    Measurement m{limit, flops / limit * 1e-9};
    m.timing = Measurement::Timing::kAbandoned;
    result = m;
  } else if (!verified.ok()) {
    result = verified;
  } else if (options_.give_up_factor > 0 && verify_run_seconds >= options_.untimed_min_seconds &&
             verify_run_seconds > options_.give_up_factor * program.best_seconds) {
    // Its verification run alone was far slower than the best: not timed again. A cold run
    // is never faster than a warm one, so its speed is reported low, never high.
    ++stats_.given_up;
    ++stats_.untimed;
    Measurement m{verify_run_seconds, flops / verify_run_seconds * 1e-9};
    m.timing = Measurement::Timing::kUntimed;
    result = m;
  } else {
    std::vector<float*> pointers;
    for (auto& buffer : program.scratch) pointers.push_back(buffer.data());
    const auto run = [&] { kernel->Run(pointers.data()); };
    TimingOptions timing =
        options_.adaptive ? AdaptiveTiming(options_.timing.budget_seconds) : options_.timing;
    if (options_.give_up_factor > 0) {
      timing.give_up_above_seconds = options_.give_up_factor * program.best_seconds;
    }
    if (options_.adaptive) {
      timing.clearly_slower_above_seconds = options_.clearly_slower_factor * program.best_seconds;
    }
    TimingResult t = MeasureRuns(run, timing);
    Measurement::Timing how = Measurement::Timing::kFull;
    if (t.end == TimingResult::End::kStable) how = Measurement::Timing::kSettled;
    if (t.end == TimingResult::End::kSlower) {
      how = t.runs == 1 ? Measurement::Timing::kOnce : Measurement::Timing::kSlower;
    }
    int64_t runs = t.runs;
    if (t.runs == 1 && t.runs < timing.min_runs) ++stats_.given_up;
    if (options_.adaptive) {
      if (t.end == TimingResult::End::kStable) ++stats_.stable;
      if (t.end == TimingResult::End::kSlower && t.runs > 1) ++stats_.slower;
      if (t.min_seconds < program.best_seconds * (1 + options_.confirm_margin)) {
        ++stats_.confirmed;
        // The adaptive runs just before warmed the caches: no warm-up again.
        const TimingResult again = MeasureRuns(run, WithoutWarmUp(options_.timing));
        t.min_seconds = std::min(t.min_seconds, again.min_seconds);
        runs += again.runs;
        how = Measurement::Timing::kConfirmed;
      }
    }
    program.best_seconds = std::min(program.best_seconds, t.min_seconds);
    Measurement m{t.min_seconds, flops / t.min_seconds * 1e-9};
    m.timing = how;
    m.timed_runs = runs;
    result = m;
  }
  const double t3 = MonotonicSeconds();
  if (result.ok()) result->work_seconds = t3 - t0;
  ++stats_.measured;
  stats_.compile_seconds += t1 - t0;
  stats_.verify_seconds += t2 - t1;
  stats_.timing_seconds += t3 - t2;
  if (!abandoned) schedules_.Insert(key, result);
  return result;
}

absl::StatusOr<Measurement> LocalTimer::RemeasureFor(const LoopTree& tree, uint64_t) {
  absl::StatusOr<Measurement> first = Measure(tree, /*may_abandon=*/false);
  if (!first.ok()) return first;
  absl::MutexLock lock(&mu_);
  ProgramData& program = ProgramFor(tree);
  const double started = MonotonicSeconds();
  absl::StatusOr<Kernel> kernel = compiler_.Compile(tree);  // verified by Measure()
  if (!kernel.ok()) return kernel.status();
  std::vector<float*> pointers;
  for (auto& buffer : program.scratch) pointers.push_back(buffer.data());
  const double t0 = MonotonicSeconds();
  const TimingResult t = MeasureRuns([&] { kernel->Run(pointers.data()); }, options_.timing);
  ++stats_.remeasured;
  Measurement m{t.min_seconds, static_cast<double>(tree.program().Flops()) / t.min_seconds * 1e-9};
  m.timed_runs = t.runs;  // Timing::kFull: the fixed budget
  // The peak beside it: the best of three short rounds right after the kernel's timing, kept
  // for the re-timings of the next second (a search re-times its best few back to back within
  // the last 5% of its time: one peak serves them all).
  const double now = MonotonicSeconds();
  if (now - beside_peak_at_ > kBesidePeakSeconds) {
    beside_peak_ = 0;
    for (int round = 0; round < 3; ++round) {
      absl::StatusOr<double> peak =
          MeasurePeakGflops(options_.isa, options_.peak_budget_seconds / 20);
      if (peak.ok()) beside_peak_ = std::max(beside_peak_, *peak);
    }
    beside_peak_at_ = MonotonicSeconds();
    ++stats_.beside_peaks;
  }
  m.peak_gflops = beside_peak_;
  m.work_seconds = MonotonicSeconds() - started;
  stats_.timing_seconds += MonotonicSeconds() - t0;
  return m;
}

absl::StatusOr<double> LocalTimer::PeakGflops() {
  absl::MutexLock lock(&mu_);
  if (peak_gflops_ == 0) {
    // The best of a few spaced rounds, so that a moment of contention at start-up (which would
    // lower the peak and inflate every reward after it) is outvoted.
    constexpr int kRounds = 5;
    absl::Status last = absl::OkStatus();
    for (int round = 0; round < kRounds; ++round) {
      if (round > 0) absl::SleepFor(absl::Milliseconds(10));
      absl::StatusOr<double> peak =
          MeasurePeakGflops(options_.isa, options_.peak_budget_seconds / kRounds);
      if (peak.ok()) {
        peak_gflops_ = std::max(peak_gflops_, *peak);
      } else {
        last = peak.status();
      }
    }
    if (peak_gflops_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("the FMA peak could not be measured: ", last.message()));
    }
  }
  return peak_gflops_;
}

LocalTimer::Stats LocalTimer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<MemoryProfile> LocalTimer::Memory() {
  absl::MutexLock lock(&mu_);
  if (!memory_.has_value()) {
    absl::StatusOr<MemoryProfile> memory =
        MeasureMemory(options_.isa, CacheLevels(ThisCpuCacheDir(), HostCpuid()),
                      options_.bandwidth_budget_seconds);
    if (!memory.ok()) return memory.status();
    memory_ = *std::move(memory);
  }
  return *memory_;
}

}  // namespace looptool
