// CallbackFrontEnd: the only gRPC type of the service. It receives CompilerGymService's eight
// RPCs through gRPC's callback API as raw bytes, so that each RPC's size limit is checked before
// anything is parsed (a 16M-action Step costs nothing), checks the shared token when one is set,
// parses, and calls LoopToolService. Cheap calls (a step or a start that asks for no kernel
// timing, GetSpaces, EndSession, AddBenchmark, ...) run inline on the thread that received them,
// which saves the hand-offs between threads that dominate a step's round trip; calls that may
// block (timing observations, a busy session, forks, session parameters) run on a ThreadPool,
// and are dropped (CANCELLED) if their client gave up while they waited.
#ifndef LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_
#define LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proto/compiler_gym_service.grpc.pb.h"
#include "service/compiler_gym_service.h"
#include "service/connection_table.h"
#include "service/thread_pool.h"
#include "util/auth_token.h"

namespace looptool::service {

// What each RPC may send, in bytes of its serialized request: sized to what it legitimately
// needs (Step: max_actions_per_step named actions plus observations; AddBenchmark:
// max_benchmarks_per_request programs of max_program_bytes).
struct RequestLimits {
  int64_t small = 4 << 10;                // GetVersion, GetSpaces, ForkSession, EndSession
  int64_t step = 256 << 10;
  int64_t start_session = 64 << 10;       // one benchmark, program included
  int64_t add_benchmark = 2 << 20;
  int64_t send_session_parameter = 64 << 10;
  int64_t largest() const { return add_benchmark; }
};

// The metadata our clients send: a random id per connection object, so per-client state
// survives reconnects (without it the peer address is the client), and the shared token.
inline constexpr char kClientIdMetadata[] = "looptool-client-id";
inline constexpr char kAuthMetadata[] = "authorization";  // "Bearer <token>"
// A client's id of one call (at most 64 bytes), the same when gRPC sends the call again: see
// RequestLog.
inline constexpr char kRequestIdMetadata[] = "looptool-request-id";

using RawCompilerGymService = compiler_gym::CompilerGymService::WithRawCallbackMethod_GetVersion<
    compiler_gym::CompilerGymService::WithRawCallbackMethod_GetSpaces<
        compiler_gym::CompilerGymService::WithRawCallbackMethod_StartSession<
            compiler_gym::CompilerGymService::WithRawCallbackMethod_ForkSession<
                compiler_gym::CompilerGymService::WithRawCallbackMethod_EndSession<
                    compiler_gym::CompilerGymService::WithRawCallbackMethod_Step<
                        compiler_gym::CompilerGymService::WithRawCallbackMethod_AddBenchmark<
                            compiler_gym::CompilerGymService::
                                WithRawCallbackMethod_SendSessionParameter<
                                    compiler_gym::CompilerGymService::Service>>>>>>>>;

// Who may call, and how each call's client is known.
struct Admission {
  // The shared token, or none (empty).
  std::string auth_token;
  // Per-client tokens: a call with one is that client's ("user:<name>"), whatever connection it
  // comes on. When a shared or per-client token is set, every call must carry one of them
  // (metadata "authorization: Bearer <token>"); UNAUTHENTICATED otherwise.
  std::vector<ClientToken> client_tokens;
};

class CallbackFrontEnd final : public RawCompilerGymService {
 public:
  // `service`, `pool` and `connections` must outlive this. Each call's CallContext::owner is
  // its client's identity for fair shares, as `connections` names it: "user:<name>" for a
  // per-client token, else the connection it came on; a self-declared looptool-client-id names
  // only its benchmarks (CallContext::client; without one, the connection). Blocking work is
  // queued on `pool` under the owner.
  CallbackFrontEnd(LoopToolService& service, ThreadPool& pool, ConnectionTable& connections,
                   RequestLimits limits, Admission admission)
      : service_(service),
        pool_(pool),
        connections_(connections),
        limits_(limits),
        admission_(std::move(admission)) {}

  // Calls received and not yet answered; the server drains them before it stops.
  int in_flight() const { return in_flight_.load(); }

  using Reactor = grpc::ServerUnaryReactor;
  using Context = grpc::CallbackServerContext;
  Reactor* GetVersion(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* GetSpaces(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* StartSession(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* ForkSession(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* EndSession(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* Step(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* AddBenchmark(Context* c, const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override;
  Reactor* SendSessionParameter(Context* c, const grpc::ByteBuffer* q,
                                grpc::ByteBuffer* r) override;

 private:
  // kStart and kStep: inline when the call times no kernel (and, for a step, its session is
  // free), else on the pool.
  enum class Mode { kInline, kPool, kStart, kStep };
  // Checks the token and `limit`, parses `Request`, runs `call(CallContext, request, reply)`
  // inline or on the pool, serializes the reply and finishes the call.
  template <typename Request, typename Reply, typename Call>
  Reactor* Serve(Context* context, const grpc::ByteBuffer* in, grpc::ByteBuffer* out,
                 int64_t limit, Mode mode, Call call);
  // The call's per-client token's name ("" for the shared token, or when none is required);
  // nullopt when the call is not admitted.
  std::optional<std::string> Admit(const Context& context) const;

  LoopToolService& service_;
  ThreadPool& pool_;
  ConnectionTable& connections_;
  const RequestLimits limits_;
  const Admission admission_;
  std::atomic<int> in_flight_{0};
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_CALLBACK_FRONT_END_H_
