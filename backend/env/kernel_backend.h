// KernelBackend: what an episode's kernels are generated for, timed with and predicted by. Three
// separate jobs: the target (the instruction set the code generator emits, which sizes register
// blocks for the `sketches` and `kernel_plan` observations), the timer (`flops`, `runtime`,
// `peak_gflops`) and the cost model (`predicted_gflops`). A plain value; a server shares one
// among its sessions.
#ifndef LOOPTOOL_BACKEND_ENV_KERNEL_BACKEND_H_
#define LOOPTOOL_BACKEND_ENV_KERNEL_BACKEND_H_

#include <memory>

#include "backend/codegen/codegen_options.h"
#include "backend/codegen/isa.h"
#include "backend/env/cost_predictor.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

struct KernelBackend {
  Isa target = Isa::kAvx512;
  // Null: the timed observations fail with FAILED_PRECONDITION.
  std::shared_ptr<KernelTimer> timer;
  // Null: predicted_gflops fails with UNIMPLEMENTED.
  std::shared_ptr<const CostPredictor> cost_model;
  // The code generator's knobs for the `kernel_plan`, `machine_code` and `kernel_abi`
  // observations (the timer's own must match: a server sets both from its flags).
  CodegenOptions codegen;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_KERNEL_BACKEND_H_
