// MeasurePeakGflops: the single-core FMA peak this code generator reaches, measured once at
// start-up with the peak kernel (backend/codegen/peak_kernel.h); rewards are normalised by it.
#ifndef LOOPTOOL_BACKEND_TIMING_PEAK_H_
#define LOOPTOOL_BACKEND_TIMING_PEAK_H_

#include "absl/status/statusor.h"
#include "backend/codegen/isa.h"
#include "backend/timing/measure.h"

namespace looptool {

// GFLOPS of the fastest single run of the peak kernel within `budget_seconds`.
absl::StatusOr<double> MeasurePeakGflops(Isa isa, double budget_seconds = 0.2);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_PEAK_H_
