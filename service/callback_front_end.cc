#include "service/callback_front_end.h"

namespace looptool::service {

template <typename Call>
grpc::ServerUnaryReactor* CallbackFrontEnd::Run(grpc::CallbackServerContext* context,
                                                bool may_block, Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ++in_flight_;
  auto finish = [this, reactor](const grpc::Status& status) {
    reactor->Finish(status);
    --in_flight_;
  };
  if (!may_block) {
    finish(call());
    return reactor;
  }
  if (!pool_.Schedule([finish, call, context] {
        // A client that gave up while the call waited in line gets nothing done for it (no
        // session it would never learn about).
        finish(context->IsCancelled() ? grpc::Status::CANCELLED : call());
      })) {
    finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "Server busy: too many calls waiting; retry later"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* CallbackFrontEnd::GetVersion(grpc::CallbackServerContext* c,
                                                       const compiler_gym::GetVersionRequest* q,
                                                       compiler_gym::GetVersionReply* r) {
  return Run(c, false, [=] { return service_.GetVersion(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::GetSpaces(grpc::CallbackServerContext* c,
                                                      const compiler_gym::GetSpacesRequest* q,
                                                      compiler_gym::GetSpacesReply* r) {
  return Run(c, false, [=] { return service_.GetSpaces(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::StartSession(grpc::CallbackServerContext* c,
                                                         const compiler_gym::StartSessionRequest* q,
                                                         compiler_gym::StartSessionReply* r) {
  return Run(c, true, [=] { return service_.StartSession(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::ForkSession(grpc::CallbackServerContext* c,
                                                        const compiler_gym::ForkSessionRequest* q,
                                                        compiler_gym::ForkSessionReply* r) {
  // Forking waits for the parent's lock, which a timing step may hold.
  return Run(c, true, [=] { return service_.ForkSession(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::EndSession(grpc::CallbackServerContext* c,
                                                       const compiler_gym::EndSessionRequest* q,
                                                       compiler_gym::EndSessionReply* r) {
  return Run(c, false, [=] { return service_.EndSession(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::Step(grpc::CallbackServerContext* c,
                                                 const compiler_gym::StepRequest* q,
                                                 compiler_gym::StepReply* r) {
  if (std::optional<grpc::Status> quick = service_.StepIfQuick(q, r)) {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    reactor->Finish(*quick);
    return reactor;
  }
  return Run(c, true, [=] { return service_.Step(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::AddBenchmark(grpc::CallbackServerContext* c,
                                                         const compiler_gym::AddBenchmarkRequest* q,
                                                         compiler_gym::AddBenchmarkReply* r) {
  return Run(c, true, [=] { return service_.AddBenchmark(nullptr, q, r); });
}

grpc::ServerUnaryReactor* CallbackFrontEnd::SendSessionParameter(
    grpc::CallbackServerContext* c, const compiler_gym::SendSessionParameterRequest* q,
    compiler_gym::SendSessionParameterReply* r) {
  return Run(c, true, [=] { return service_.SendSessionParameter(nullptr, q, r); });
}

}  // namespace looptool::service
