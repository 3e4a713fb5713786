// LoopToolService: CompilerGym's CompilerGymService over the loop-nest engine. Each handler
// looks its session up, locks only that session, and answers with CompilerGym's status codes
// and messages; no exception escapes a handler (it becomes INTERNAL).
#ifndef LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_
#define LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend/env/evaluator.h"
#include "backend/env/observation.h"
#include "backend/util/limits.h"
#include "proto/compiler_gym_service.grpc.pb.h"
#include "service/benchmark_store.h"
#include "service/session_registry.h"

namespace looptool::service {

struct ServiceOptions {
  Limits limits;
  int max_sessions = 1024;
  int max_actions_per_step = 4096;
  int max_observations_per_request = 64;
  int max_benchmarks_per_request = 1024;
  int64_t max_benchmark_cache_bytes = int64_t{256} << 20;  // clients may lower it, not raise it
  std::string compiler_version = "LoopTool 0.1";
  // Test hook (--test_hooks): runs a crashing ("crash") or hanging ("hang") kernel in a worker
  // and returns the status the step gets. Null: the test.inject_fault parameter is unknown.
  std::function<absl::Status(const std::string& fault)> fault_hook;
};

class LoopToolService final : public compiler_gym::CompilerGymService::Service {
 public:
  // `evaluator` times kernels for the flops/runtime/peak_gflops observations (may be null:
  // those observations then fail with FAILED_PRECONDITION).
  LoopToolService(ServiceOptions options, std::shared_ptr<KernelEvaluator> evaluator);

  grpc::Status GetVersion(grpc::ServerContext*, const compiler_gym::GetVersionRequest*,
                          compiler_gym::GetVersionReply*) override;
  grpc::Status GetSpaces(grpc::ServerContext*, const compiler_gym::GetSpacesRequest*,
                         compiler_gym::GetSpacesReply*) override;
  grpc::Status StartSession(grpc::ServerContext*, const compiler_gym::StartSessionRequest*,
                            compiler_gym::StartSessionReply*) override;
  grpc::Status ForkSession(grpc::ServerContext*, const compiler_gym::ForkSessionRequest*,
                           compiler_gym::ForkSessionReply*) override;
  grpc::Status EndSession(grpc::ServerContext*, const compiler_gym::EndSessionRequest*,
                          compiler_gym::EndSessionReply*) override;
  grpc::Status Step(grpc::ServerContext*, const compiler_gym::StepRequest*,
                    compiler_gym::StepReply*) override;
  grpc::Status AddBenchmark(grpc::ServerContext*, const compiler_gym::AddBenchmarkRequest*,
                            compiler_gym::AddBenchmarkReply*) override;
  grpc::Status SendSessionParameter(grpc::ServerContext*,
                                    const compiler_gym::SendSessionParameterRequest*,
                                    compiler_gym::SendSessionParameterReply*) override;

  // Runs the step at once if it is quick: it asks for no timing observation and its session is
  // free (the session's lock is taken here without waiting, and held for the step). nullopt
  // when it may wait: the caller runs Step where blocking is allowed.
  std::optional<grpc::Status> StepIfQuick(const compiler_gym::StepRequest* request,
                                          compiler_gym::StepReply* reply);

  // Ends the sessions idle for longer than `timeout`; returns how many. The server calls this
  // periodically.
  int ReapIdleSessions(absl::Duration timeout);
  int num_sessions() const { return sessions_.size(); }

 private:
  absl::Status DoStartSession(const compiler_gym::StartSessionRequest& request,
                              compiler_gym::StartSessionReply& reply);
  absl::Status DoForkSession(const compiler_gym::ForkSessionRequest& request,
                             compiler_gym::ForkSessionReply& reply);
  absl::Status DoStep(const compiler_gym::StepRequest& request, compiler_gym::StepReply& reply);
  absl::Status DoStepLocked(Session& session, const compiler_gym::StepRequest& request,
                            compiler_gym::StepReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  absl::Status DoAddBenchmark(const compiler_gym::AddBenchmarkRequest& request);
  absl::Status DoSendSessionParameter(const compiler_gym::SendSessionParameterRequest& request,
                                      compiler_gym::SendSessionParameterReply& reply);
  // Appends the observations at `indices` of `env`'s state, running `session`'s pending fault
  // first for a timing observation.
  absl::Status Observe(const Environment& env, std::string& pending_fault,
                       const google::protobuf::RepeatedField<int32_t>& indices,
                       google::protobuf::RepeatedPtrField<compiler_gym::Event>& out) const;

  const ServiceOptions options_;
  const std::shared_ptr<KernelEvaluator> evaluator_;
  const std::vector<ObservationSpace> observation_spaces_;
  BenchmarkStore benchmarks_;
  SessionRegistry sessions_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_
