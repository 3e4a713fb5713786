#include "tests/faults/fault_injection.h"

#include <malloc.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace looptool::testing {
namespace {

// Faults armed per tenant (client); shared by the evaluator wrapper and the parameter handler.
class Armed {
 public:
  void Arm(uint64_t tenant, std::string fault) {
    absl::MutexLock lock(&mu_);
    faults_[tenant] = std::move(fault);
  }
  // The tenant's armed fault, disarmed; "" when none.
  std::string Take(uint64_t tenant) {
    absl::MutexLock lock(&mu_);
    auto it = faults_.find(tenant);
    if (it == faults_.end()) return "";
    std::string fault = std::move(it->second);
    faults_.erase(it);
    ++taken_;
    return fault;
  }
  // Faults fired so far (their kernels asked of a worker).
  int64_t taken() {
    absl::MutexLock lock(&mu_);
    return taken_;
  }

 private:
  absl::Mutex mu_;
  std::map<uint64_t, std::string> faults_ ABSL_GUARDED_BY(mu_);
  int64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
};

// The server's worker pool, once the timer wrapper has seen it; for `test.prepares`.
class PoolHolder {
 public:
  void Set(std::shared_ptr<WorkerPool> pool) {
    absl::MutexLock lock(&mu_);
    pool_ = std::move(pool);
  }
  std::shared_ptr<WorkerPool> Get() {
    absl::MutexLock lock(&mu_);
    return pool_;
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<WorkerPool> pool_ ABSL_GUARDED_BY(mu_);
};

// Runs a tenant's armed fault in a worker before measuring; the step gets the fault's status.
// Everything else goes to the pool as the server's own timer would send it.
class FaultInjectingTimer : public KernelTimer {
 public:
  FaultInjectingTimer(std::shared_ptr<WorkerPool> pool, std::shared_ptr<Armed> armed)
      : pool_(std::move(pool)), armed_(std::move(armed)) {}
  void PrepareFor(const LoopTree& tree, uint64_t tenant) override {
    pool_->PrepareFor(tree, tenant);
  }
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override {
    if (std::string fault = armed_->Take(tenant); !fault.empty()) {
      absl::Status s = pool_->RunExtension(fault, tenant);
      if (!s.ok()) return s;
    }
    return pool_->MeasureFor(tree, tenant);
  }
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override {
    return pool_->RemeasureFor(tree, tenant);
  }
  absl::StatusOr<double> PeakGflops() override { return pool_->PeakGflops(); }
  absl::StatusOr<MemoryProfile> Memory() override { return pool_->Memory(); }

 private:
  std::shared_ptr<WorkerPool> pool_;
  std::shared_ptr<Armed> armed_;
};

}  // namespace

service::ServerExtensions FaultServerExtensions() {
  auto armed = std::make_shared<Armed>();
  auto pools = std::make_shared<PoolHolder>();
  service::ServerExtensions ext;
  ext.wrap_timer = [armed, pools](std::shared_ptr<WorkerPool> pool) {
    pools->Set(pool);
    return std::make_shared<FaultInjectingTimer>(std::move(pool), armed);
  };
  ext.parameter_handler = [armed, pools](const Episode& episode, const std::string& key,
                                         const std::string& value) -> absl::StatusOr<std::string> {
    if (key == kTrimHeapParameter) {
      malloc_trim(0);
      return std::string("trimmed");
    }
    if (key == kFaultsFiredParameter) return absl::StrCat(armed->taken());
    if (key == kPreparesParameter) {
      const std::shared_ptr<WorkerPool> pool = pools->Get();
      if (pool == nullptr) return absl::FailedPreconditionError("no worker pool yet");
      const WorkerPool::Stats st = pool->stats();
      return absl::StrCat(st.prepared, " ", st.prepares_cached, " ", st.prepares_failed, " ",
                          st.measured);
    }
    if (key != kInjectFaultParameter) {
      return absl::InvalidArgumentError(absl::StrCat("Unknown parameter: ", key));
    }
    if (value != "crash" && value != "hang") {
      return absl::InvalidArgumentError(
          absl::StrCat(kInjectFaultParameter, " takes crash or hang, got '", value, "'"));
    }
    armed->Arm(episode.tenant(), value);
    return value;
  };
  return ext;
}

}  // namespace looptool::testing
