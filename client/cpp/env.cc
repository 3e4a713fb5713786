#include "client/cpp/env.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/async_unary_call.h"
#include "util/status_macros.h"

namespace looptool::client {

const Value* StepResult::Find(absl::string_view name) const {
  for (size_t i = 0; i < names.size() && i < observations.size(); ++i) {
    if (names[i] == name) return &observations[i];
  }
  return nullptr;
}

absl::StatusOr<Value> StepResult::Get(absl::string_view name) const {
  if (const Value* v = Find(name)) return *v;
  return absl::NotFoundError(absl::StrCat("the step did not ask for observation '", name,
                                          "' (it asked for: ", absl::StrJoin(names, ", "), ")"));
}

Env::Env(std::shared_ptr<Connection> connection, int64_t session, std::string benchmark,
         std::string action_space, std::shared_ptr<const std::vector<std::string>> action_names)
    : connection_(std::move(connection)),
      session_id_(session),
      open_(true),
      benchmark_(std::move(benchmark)),
      action_space_(std::move(action_space)),
      action_names_(std::move(action_names)) {}

Env::Env(Env&& o) noexcept { *this = std::move(o); }

Env& Env::operator=(Env&& o) noexcept {
  if (this != &o) {
    Close().IgnoreError();
    connection_ = std::move(o.connection_);
    session_id_ = o.session_id_;
    deadline_ = o.deadline_;
    open_ = o.open_;
    benchmark_ = std::move(o.benchmark_);
    action_space_ = std::move(o.action_space_);
    action_names_ = std::move(o.action_names_);
    o.open_ = false;
  }
  return *this;
}

Env::~Env() { Close().IgnoreError(); }

absl::StatusOr<Env> Env::Start(std::shared_ptr<Connection> connection,
                               const std::string& benchmark, const std::string& action_space) {
  ASSIGN_OR_RETURN(const int space, connection->ActionSpaceIndex(action_space));
  compiler_gym::StartSessionRequest request;
  request.mutable_benchmark()->set_uri(benchmark);
  request.set_action_space(space);
  compiler_gym::StartSessionReply reply;
  RETURN_IF_ERROR(connection->Invoke([&](grpc::ClientContext* ctx) {
    return connection->stub().StartSession(ctx, request, &reply);
  }));
  if (reply.has_new_action_space()) {
    // The server runs the session in another space than asked (loop_tool-cpu-v0 benchmarks
    // take upstream's `simple` by default): index actions in the space it reports.
    const auto& names = reply.new_action_space().space().named_discrete().name();
    return Env(std::move(connection), reply.session_id(), benchmark,
               reply.new_action_space().name(),
               std::make_shared<const std::vector<std::string>>(names.begin(), names.end()));
  }
  auto names = std::make_shared<const std::vector<std::string>>(*connection->ActionNames(action_space));
  return Env(std::move(connection), reply.session_id(), benchmark, action_space, std::move(names));
}

absl::StatusOr<Env> Env::StartProgram(std::shared_ptr<Connection> connection,
                                      const std::string& uri, const std::string& program,
                                      const std::string& action_space) {
  compiler_gym::AddBenchmarkRequest request;
  compiler_gym::Benchmark* b = request.add_benchmark();
  b->set_uri(uri);
  b->mutable_program()->set_contents(program);
  compiler_gym::AddBenchmarkReply reply;
  RETURN_IF_ERROR(connection->Invoke([&](grpc::ClientContext* ctx) {
    return connection->stub().AddBenchmark(ctx, request, &reply);
  }));
  return Start(std::move(connection), uri, action_space);
}

absl::Status Env::Reset(const std::string& benchmark) {
  const std::string uri = benchmark.empty() ? benchmark_ : benchmark;
  std::shared_ptr<Connection> connection = connection_;
  const std::string space = action_space_;
  const absl::Time deadline = deadline_;
  Close().IgnoreError();
  ASSIGN_OR_RETURN(*this, Start(std::move(connection), uri, space));
  deadline_ = deadline;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Env::Step(const std::vector<int>& actions,
                                     const std::vector<std::string>& observations) {
  if (!open_) return absl::FailedPreconditionError("the environment is closed");
  compiler_gym::StepRequest request;
  request.set_session_id(session_id_);
  for (int a : actions) request.add_action()->set_int64_value(a);
  for (const std::string& name : observations) {
    ASSIGN_OR_RETURN(const int index, connection_->ObservationIndex(name));
    request.add_observation_space(index);
  }
  compiler_gym::StepReply reply;
  RETURN_IF_ERROR(connection_->Invoke(
      [&](grpc::ClientContext* ctx) { return connection_->stub().Step(ctx, request, &reply); },
      connection_->TimeoutUntil(deadline_)));
  StepResult result;
  result.action_had_no_effect = reply.action_had_no_effect();
  result.names = observations;
  for (const compiler_gym::Event& e : reply.observation()) {
    ASSIGN_OR_RETURN(Value v, FromEvent(e));
    result.observations.push_back(std::move(v));
  }
  if (result.observations.size() != observations.size()) {
    return absl::InternalError("the server returned the wrong number of observations");
  }
  return result;
}

absl::StatusOr<StepResult> Env::StepNamed(const std::vector<std::string>& actions,
                                          const std::vector<std::string>& observations) {
  std::vector<int> indices;
  for (const std::string& name : actions) {
    const int i = ActionIndex(name);
    if (i < 0) return absl::InvalidArgumentError(absl::StrCat("unknown action '", name, "'"));
    indices.push_back(i);
  }
  return Step(indices, observations);
}

absl::StatusOr<Value> Env::Observe(const std::string& observation) {
  ASSIGN_OR_RETURN(StepResult r, Step({}, {observation}));
  return std::move(r.observations[0]);
}

absl::StatusOr<Env> Env::Fork() const {
  if (!open_) return absl::FailedPreconditionError("the environment is closed");
  compiler_gym::ForkSessionRequest request;
  request.set_session_id(session_id_);
  compiler_gym::ForkSessionReply reply;
  RETURN_IF_ERROR(connection_->Invoke(
      [&](grpc::ClientContext* ctx) { return connection_->stub().ForkSession(ctx, request, &reply); },
      connection_->TimeoutUntil(deadline_)));
  Env fork(connection_, reply.session_id(), benchmark_, action_space_, action_names_);
  fork.deadline_ = deadline_;
  return fork;
}

absl::Status Env::Close() {
  if (!open_) return absl::OkStatus();
  open_ = false;
  compiler_gym::EndSessionRequest request;
  request.set_session_id(session_id_);
  compiler_gym::EndSessionReply reply;
  return connection_->Invoke(
      [&](grpc::ClientContext* ctx) {
        return connection_->stub().EndSession(ctx, request, &reply);
      },
      CloseTimeout(*connection_), /*wait_for_ready=*/false);
}

absl::Duration Env::CloseTimeout(const Connection& connection) {
  // A server that is gone has no session left to end: do not wait for one.
  return connection.unanswered() ? absl::Milliseconds(250) : absl::Seconds(5);
}

absl::Status Env::CloseAll(const std::vector<Env*>& envs) {
  // Calls open at once at most: a server bounds a client's streams (LoopTool's cuts a client
  // that holds more than --max_streams_per_connection open, 16 by default, acknowledged
  // SETTINGS or not; on a connection that has its SETTINGS, gRPC holds calls beyond the limit).
  constexpr int kInFlight = 8;
  const auto is_open = [](const Env* env) { return env != nullptr && env->open_; };
  const auto open = std::count_if(envs.begin(), envs.end(), is_open);
  if (open == 0) return absl::OkStatus();
  if (open == 1) return (*std::find_if(envs.begin(), envs.end(), is_open))->Close();
  struct Call {
    compiler_gym::EndSessionRequest request;
    compiler_gym::EndSessionReply reply;
    std::unique_ptr<grpc::ClientContext> context;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<compiler_gym::EndSessionReply>> reader;
    const Connection* connection = nullptr;
  };
  grpc::CompletionQueue queue;
  std::vector<Call> calls(envs.size());  // sized once: each call's address is its tag
  size_t next = 0;                       // the next of `envs` to end
  // Sends the next open one's call; false when none is left.
  auto send_next = [&]() {
    for (; next < envs.size(); ++next) {
      Env* env = envs[next];
      if (env == nullptr || !env->open_) continue;
      env->open_ = false;
      Call& call = calls[next++];
      call.connection = env->connection_.get();
      call.request.set_session_id(env->session_id_);
      call.context =
          call.connection->Context(CloseTimeout(*call.connection), /*wait_for_ready=*/false);
      call.reader =
          env->connection_->stub().AsyncEndSession(call.context.get(), call.request, &queue);
      call.reader->Finish(&call.reply, &call.status, &call);
      return true;
    }
    return false;
  };
  int in_flight = 0;
  while (in_flight < kInFlight && send_next()) ++in_flight;
  absl::Status first;
  while (in_flight > 0) {
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    --in_flight;
    const Call& call = *static_cast<const Call*>(tag);
    const absl::Status status = call.connection->Heard(FromGrpc(call.status));
    if (first.ok()) first = status;
    if (send_next()) ++in_flight;
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return first;
}

absl::StatusOr<Retiming> Env::Remeasure() {
  if (!open_) return absl::FailedPreconditionError("the environment is closed");
  compiler_gym::SendSessionParameterRequest request;
  request.set_session_id(session_id_);
  compiler_gym::SessionParameter* p = request.add_parameter();
  p->set_key("looptool.remeasure");
  compiler_gym::SendSessionParameterReply reply;
  RETURN_IF_ERROR(connection_->Invoke([&](grpc::ClientContext* ctx) {
    return connection_->stub().SendSessionParameter(ctx, request, &reply);
  }));
  // The GFLOPS, then (from servers that measure it) the peak beside it.
  Retiming r;
  if (reply.reply_size() < 1 || reply.reply_size() > 2 ||
      !absl::SimpleAtod(reply.reply(0), &r.gflops) ||
      (reply.reply_size() == 2 && !absl::SimpleAtod(reply.reply(1), &r.peak_gflops))) {
    return absl::InternalError("the server's looptool.remeasure reply is not one or two numbers");
  }
  return r;
}

int Env::ActionIndex(const std::string& name) const {
  for (size_t i = 0; i < action_names_->size(); ++i) {
    if ((*action_names_)[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace looptool::client
