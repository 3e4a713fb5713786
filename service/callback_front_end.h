// CallbackFrontEnd: serves LoopToolService through gRPC's callback API. Cheap calls (a step that
// asks for no kernel timing, GetSpaces, EndSession, ...) run inline on the thread that received
// them, which saves the hand-offs between threads that dominate a step's round trip; calls that
// may block (timing observations, a busy session, starting or forking sessions) run on a
// ThreadPool, and are dropped (CANCELLED) if their client gave up while they waited.
#ifndef LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_
#define LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_

#include <atomic>
#include <memory>

#include "proto/compiler_gym_service.grpc.pb.h"
#include "service/compiler_gym_service.h"
#include "service/thread_pool.h"

namespace looptool::service {

class CallbackFrontEnd final : public compiler_gym::CompilerGymService::CallbackService {
 public:
  // `service` and `pool` must outlive this.
  CallbackFrontEnd(LoopToolService& service, ThreadPool& pool) : service_(service), pool_(pool) {}

  // Calls received and not yet answered; the server drains them before it stops.
  int in_flight() const { return in_flight_.load(); }

  grpc::ServerUnaryReactor* GetVersion(grpc::CallbackServerContext*,
                                       const compiler_gym::GetVersionRequest*,
                                       compiler_gym::GetVersionReply*) override;
  grpc::ServerUnaryReactor* GetSpaces(grpc::CallbackServerContext*,
                                      const compiler_gym::GetSpacesRequest*,
                                      compiler_gym::GetSpacesReply*) override;
  grpc::ServerUnaryReactor* StartSession(grpc::CallbackServerContext*,
                                         const compiler_gym::StartSessionRequest*,
                                         compiler_gym::StartSessionReply*) override;
  grpc::ServerUnaryReactor* ForkSession(grpc::CallbackServerContext*,
                                        const compiler_gym::ForkSessionRequest*,
                                        compiler_gym::ForkSessionReply*) override;
  grpc::ServerUnaryReactor* EndSession(grpc::CallbackServerContext*,
                                       const compiler_gym::EndSessionRequest*,
                                       compiler_gym::EndSessionReply*) override;
  grpc::ServerUnaryReactor* Step(grpc::CallbackServerContext*, const compiler_gym::StepRequest*,
                                 compiler_gym::StepReply*) override;
  grpc::ServerUnaryReactor* AddBenchmark(grpc::CallbackServerContext*,
                                         const compiler_gym::AddBenchmarkRequest*,
                                         compiler_gym::AddBenchmarkReply*) override;
  grpc::ServerUnaryReactor* SendSessionParameter(
      grpc::CallbackServerContext*, const compiler_gym::SendSessionParameterRequest*,
      compiler_gym::SendSessionParameterReply*) override;

 private:
  // Runs `call` (returning grpc::Status) inline or on the pool and finishes the call with it.
  template <typename Call>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, bool may_block, Call call);

  LoopToolService& service_;
  ThreadPool& pool_;
  std::atomic<int> in_flight_{0};
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_
