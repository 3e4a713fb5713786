// LoopToolService: CompilerGym's CompilerGymService operations over a list of engines
// (backend/env/engine.h), as a plain class of absl::Status-returning calls (the gRPC front end,
// callback_front_end.h, is the only gRPC type). GetSpaces lists the engines' action spaces in
// engine order (one engine's first, when the options say so) and the union of their observation
// spaces by name, in engine order (the first engine's declaration of a shared name);
// StartSession hands the benchmark to the engine that claims it.
// Each call looks its session up, locks only that session, and answers with CompilerGym's
// status codes and messages; no exception escapes (it becomes INTERNAL). A Step is a
// transaction: one that fails (a bad action, an observation that cannot be computed, a kernel
// that cannot be measured) leaves its session as it was. Per-client state (added
// benchmarks, the benchmark cache's size) is keyed by CallContext::client; fair shares
// (sessions per client, eviction when full, the benchmark cache's bytes, kernel queues) by
// CallContext::owner, which a caller cannot choose.
#ifndef LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_
#define LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/env/engine.h"
#include "backend/env/observation.h"
#include "backend/ir/limits.h"
#include "proto/compiler_gym_service.pb.h"
#include "service/benchmark_store.h"
#include "service/request_log.h"
#include "service/session_registry.h"

namespace looptool::service {

struct ServiceOptions {
  Limits limits;
  int max_sessions = 1024;
  int max_sessions_per_client = 256;  // per CallContext::owner (see SessionRegistry)
  int max_actions_per_step = 4096;
  int max_observations_per_request = 64;
  int max_benchmarks_per_request = 64;
  int max_parameters_per_request = 64;
  int64_t max_benchmark_cache_bytes = int64_t{64} << 20;   // one client's; clients may lower it
  int64_t max_total_benchmark_bytes = int64_t{512} << 20;  // all clients' together
  std::string compiler_version = "LoopTool 0.1";
  // GetSpaces lists this engine's action spaces before the others' (CompilerGym clients of
  // loop_tool-v0 take the first as the default before their first reset); empty: engine order.
  // Observation spaces keep the engine order either way.
  std::string engine_listed_first;
  // Session parameters this service does not know go here, with the session's episode (an
  // extension point: tests install a fault injector). Null: unknown keys are INVALID_ARGUMENT.
  std::function<absl::StatusOr<std::string>(const Episode& episode, const std::string& key,
                                            const std::string& value)>
      parameter_handler;
};

// Who makes a call: the front end fills it from the call's metadata (a client id our clients
// send) or its peer address.
struct CallContext {
  std::string client;
  // The caller's identity for fair shares (sessions, queued work, kernel time): its per-client
  // token's name ("user:<name>") or its connection ("conn:<peer>"). Never self-declared.
  std::string owner;
  // The caller's id of this call (metadata looptool-request-id; empty: none): a StartSession or
  // ForkSession sent again with the same id returns the session the first made (RequestLog).
  std::string request_id;
};

class LoopToolService {
 public:
  // `engines`: at least one, listed in this order.
  LoopToolService(ServiceOptions options, std::vector<std::shared_ptr<const Engine>> engines);

  absl::Status GetVersion(const compiler_gym::GetVersionRequest& request,
                          compiler_gym::GetVersionReply& reply);
  absl::Status GetSpaces(const compiler_gym::GetSpacesRequest& request,
                         compiler_gym::GetSpacesReply& reply);
  absl::Status StartSession(const CallContext& call,
                            const compiler_gym::StartSessionRequest& request,
                            compiler_gym::StartSessionReply& reply);
  absl::Status ForkSession(const CallContext& call,
                           const compiler_gym::ForkSessionRequest& request,
                           compiler_gym::ForkSessionReply& reply);
  absl::Status EndSession(const compiler_gym::EndSessionRequest& request,
                          compiler_gym::EndSessionReply& reply);
  absl::Status Step(const compiler_gym::StepRequest& request, compiler_gym::StepReply& reply);
  absl::Status AddBenchmark(const CallContext& call,
                            const compiler_gym::AddBenchmarkRequest& request,
                            compiler_gym::AddBenchmarkReply& reply);
  absl::Status SendSessionParameter(const CallContext& call,
                                    const compiler_gym::SendSessionParameterRequest& request,
                                    compiler_gym::SendSessionParameterReply& reply);

  // Runs the step at once if it is quick: it asks for no timing observation and its session is
  // free (the session's lock is taken here without waiting, and held for the step). nullopt
  // when it may wait: the caller runs Step where blocking is allowed.
  std::optional<absl::Status> StepIfQuick(const compiler_gym::StepRequest& request,
                                          compiler_gym::StepReply& reply);

  // Whether observing `indices` is slow (compiles a kernel, may wait for a worker).
  bool IsSlow(const google::protobuf::RepeatedField<int32_t>& indices) const;

  // Ends the sessions idle for longer than `timeout`; returns how many. The server calls this
  // periodically.
  int ReapIdleSessions(absl::Duration timeout);
  // Ends the sessions `owner` holds that nobody used after `since` (when its client left);
  // returns how many.
  int EndSessionsOf(const std::string& owner, absl::Time since);
  int num_sessions() const { return sessions_.size(); }

 private:
  absl::Status DoStartSession(const CallContext& call,
                              const compiler_gym::StartSessionRequest& request,
                              compiler_gym::StartSessionReply& reply);
  absl::Status DoForkSession(const CallContext& call,
                             const compiler_gym::ForkSessionRequest& request,
                             compiler_gym::ForkSessionReply& reply);
  // The kernel queue of `owner`'s sessions (WorkerPool serves tenants in turn).
  static uint64_t TenantOf(const std::string& owner);
  // What an attempt of `call`'s request found: the live session an earlier attempt made
  // (`session`, `id`), or none, and then `claim` is this attempt's (RequestLog).
  struct Attempt {
    std::shared_ptr<Session> session;
    int64_t id = 0;
    RequestLog::Claim claim;
  };
  absl::StatusOr<Attempt> BeginAttempt(const CallContext& call);
  absl::Status DoStep(const compiler_gym::StepRequest& request, compiler_gym::StepReply& reply);
  absl::Status DoStepLocked(Session& session, const compiler_gym::StepRequest& request,
                            compiler_gym::StepReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  absl::Status DoAddBenchmark(const CallContext& call,
                              const compiler_gym::AddBenchmarkRequest& request);
  absl::Status DoSendSessionParameter(const CallContext& call,
                                      const compiler_gym::SendSessionParameterRequest& request,
                                      compiler_gym::SendSessionParameterReply& reply);
  // Appends the observations at `indices` of `episode`'s state.
  absl::Status Observe(const Episode& episode,
                       const google::protobuf::RepeatedField<int32_t>& indices,
                       google::protobuf::RepeatedPtrField<compiler_gym::Event>& out) const;

  // What an index of GetSpaces' action space list refers to.
  struct ActionSpaceRef {
    int engine = 0;  // index into engines_
    int index = 0;   // into that engine's ActionSpaces()
    compiler_gym::ActionSpace proto;
  };
  // What an index of GetSpaces' observation space list refers to.
  struct ObservationSpaceRef {
    ObservationSpace space;
    bool slow = false;  // computing it compiles (and may time) a kernel in some engine
  };
  // The engine that serves `uri` (its index); the claiming engine's error, or NOT_FOUND when
  // none claims it.
  absl::StatusOr<int> EngineFor(const std::string& uri) const;

  const ServiceOptions options_;
  const std::vector<std::shared_ptr<const Engine>> engines_;
  const std::vector<ActionSpaceRef> action_spaces_;
  const std::vector<ObservationSpaceRef> observation_spaces_;
  BenchmarkStore benchmarks_;
  SessionRegistry sessions_;
  RequestLog requests_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_COMPILER_GYM_SERVICE_H_
