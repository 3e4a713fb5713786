#include "service/compiler_gym_service.h"

#include "absl/hash/hash.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"
#include "util/strict_int.h"
#include "service/dataset_parameters.h"
#include "service/proto_convert.h"

namespace looptool::service {
namespace {

constexpr char kCompilerGymVersion[] = "0.2.5";  // the protocol generation this server speaks

// The exception firewall: whatever a handler throws becomes INTERNAL, never UNKNOWN.
template <typename Fn>
absl::Status Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("Unhandled exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("Unhandled exception");
  }
}

// A multi-discrete action (loop_nest's (transformation, level, parameter)) as an
// int64_tensor or an event_list of int64_value events, resolved by the episode's space.
absl::StatusOr<int64_t> MultiDiscreteIndex(const compiler_gym::Event& e, const Episode& episode) {
  std::vector<int64_t> v;
  if (e.value_case() == compiler_gym::Event::kInt64Tensor) {
    v.assign(e.int64_tensor().value().begin(), e.int64_tensor().value().end());
  } else {
    for (const compiler_gym::Event& x : e.event_list().event()) {
      if (x.value_case() != compiler_gym::Event::kInt64Value) {
        return absl::InvalidArgumentError(
            "A multi-discrete action must hold three integers: (transformation, level, "
            "parameter)");
      }
      v.push_back(x.int64_value());
    }
  }
  return episode.MultiDiscreteIndex(v);
}

// An action is an index (CompilerGym's discrete actions), loop_nest's (transformation, level,
// parameter) triple, or, for people and scripts, a name.
absl::StatusOr<int64_t> ActionIndex(const compiler_gym::Event& e, const Episode& episode) {
  if (e.value_case() == compiler_gym::Event::kInt64Value) return e.int64_value();
  if (e.value_case() == compiler_gym::Event::kInt64Tensor ||
      e.value_case() == compiler_gym::Event::kEventList) {
    return MultiDiscreteIndex(e, episode);
  }
  if (e.value_case() == compiler_gym::Event::kStringValue) {
    const std::vector<std::string>& names = episode.action_names();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == e.string_value()) return static_cast<int64_t>(i);
    }
    return absl::InvalidArgumentError(absl::StrCat("Unknown action '", e.string_value(),
                                                   "' for action space ",
                                                   episode.action_space_name()));
  }
  return absl::InvalidArgumentError(
      "An action must be an Event with int64_value (the index in the action space), "
      "string_value (the action's name) or, in loop_nest, int64_tensor (transformation, level, "
      "parameter)");
}

// GetSpaces' action spaces: every engine's, the one named `first` (if any) first, then the
// others in engine order.
template <typename Ref>
std::vector<Ref> ListActionSpaces(const std::vector<std::shared_ptr<const Engine>>& engines,
                                  const std::string& first) {
  std::vector<size_t> order;
  for (size_t e = 0; e < engines.size(); ++e) {
    if (engines[e]->name() == first) {
      order.insert(order.begin(), e);
    } else {
      order.push_back(e);
    }
  }
  std::vector<Ref> refs;
  for (size_t e : order) {
    const std::vector<NamedActionSpace>& spaces = engines[e]->ActionSpaces();
    for (size_t i = 0; i < spaces.size(); ++i) {
      refs.push_back({static_cast<int>(e), static_cast<int>(i), ToProto(spaces[i].name,
                                                                        spaces[i].actions)});
    }
  }
  return refs;
}

// GetSpaces' observation spaces: the union of the engines' by name, in engine order, declared
// as the first engine that has the name declares it; slow when it is slow in any.
template <typename Ref>
std::vector<Ref> ListObservationSpaces(
    const std::vector<std::shared_ptr<const Engine>>& engines) {
  std::vector<Ref> refs;
  for (const auto& engine : engines) {
    for (const EngineObservation& o : engine->Observations()) {
      auto known = std::find_if(refs.begin(), refs.end(),
                                [&](const Ref& r) { return r.space.name == o.space.name; });
      if (known == refs.end()) {
        refs.push_back({o.space, o.slow});
      } else {
        known->slow = known->slow || o.slow;
      }
    }
  }
  return refs;
}

}  // namespace

LoopToolService::LoopToolService(ServiceOptions options,
                                 std::vector<std::shared_ptr<const Engine>> engines)
    : options_(std::move(options)),
      engines_(std::move(engines)),
      action_spaces_(ListActionSpaces<ActionSpaceRef>(engines_, options_.engine_listed_first)),
      observation_spaces_(ListObservationSpaces<ObservationSpaceRef>(engines_)),
      benchmarks_(options_.limits, options_.max_benchmark_cache_bytes,
                  options_.max_total_benchmark_bytes),
      sessions_(options_.max_sessions, options_.max_sessions_per_client),
      requests_(/*capacity=*/1 << 16, /*ttl=*/absl::Minutes(10), /*wait=*/absl::Seconds(30)) {}

uint64_t LoopToolService::TenantOf(const std::string& owner) {
  return absl::Hash<std::string>{}(owner);
}

absl::StatusOr<LoopToolService::Attempt> LoopToolService::BeginAttempt(const CallContext& call) {
  Attempt attempt;
  for (;;) {
    ASSIGN_OR_RETURN(RequestLog::Begun begun,
                     requests_.Begin(call.client, call.request_id, absl::Now()));
    if (!begun.made.has_value()) {
      attempt.claim = std::move(begun.claim);
      return attempt;
    }
    absl::StatusOr<std::shared_ptr<Session>> session = sessions_.Find(*begun.made, absl::Now());
    if (session.ok()) {
      attempt.session = *std::move(session);
      attempt.id = *begun.made;
      return attempt;
    }
    // Ended since: this attempt makes a new one.
    requests_.Forget(call.client, call.request_id, *begun.made);
  }
}

absl::StatusOr<int> LoopToolService::EngineFor(const std::string& uri) const {
  int best = -1;
  Claim best_claim = Claim::kNone;
  for (size_t e = 0; e < engines_.size(); ++e) {
    ASSIGN_OR_RETURN(const Claim claim, engines_[e]->Claims(uri));
    if (claim > best_claim) {
      best = static_cast<int>(e);
      best_claim = claim;
    }
  }
  if (best < 0) return absl::NotFoundError(absl::StrCat("Benchmark not found: ", uri));
  return best;
}

absl::Status LoopToolService::GetVersion(const compiler_gym::GetVersionRequest&,
                                         compiler_gym::GetVersionReply& reply) {
  return Guarded([&] {
    reply.set_service_version(kCompilerGymVersion);
    reply.set_compiler_version(options_.compiler_version);
    return absl::OkStatus();
  });
}

absl::Status LoopToolService::GetSpaces(const compiler_gym::GetSpacesRequest&,
                                        compiler_gym::GetSpacesReply& reply) {
  return Guarded([&] {
    for (const ActionSpaceRef& s : action_spaces_) *reply.add_action_space_list() = s.proto;
    for (const ObservationSpaceRef& s : observation_spaces_) {
      *reply.add_observation_space_list() = ToProto(s.space);
    }
    return absl::OkStatus();
  });
}

absl::Status LoopToolService::StartSession(const CallContext& call,
                                           const compiler_gym::StartSessionRequest& request,
                                           compiler_gym::StartSessionReply& reply) {
  return Guarded([&] { return DoStartSession(call, request, reply); });
}

absl::Status LoopToolService::DoStartSession(const CallContext& call,
                                             const compiler_gym::StartSessionRequest& request,
                                             compiler_gym::StartSessionReply& reply) {
  const std::string& uri = request.benchmark().uri();
  if (uri.empty()) return absl::InvalidArgumentError("No benchmark URI set for StartSession()");
  if (request.benchmark().has_program()) {
    compiler_gym::AddBenchmarkRequest add;
    *add.add_benchmark() = request.benchmark();
    RETURN_IF_ERROR(DoAddBenchmark(call, add));
  }
  const int space = request.action_space();
  if (space < 0 || space >= static_cast<int>(action_spaces_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("Action space index out of range: ", space));
  }
  if (request.observation_space_size() > options_.max_observations_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Too many observations requested: at most ", options_.max_observations_per_request));
  }
  // Index 0, what CompilerGym's client sends when no space was chosen, means the benchmark's
  // default space (its engine's first: loop_tool, or upstream's simple for loop_tool-cpu-v0),
  // reported back when it is not the one listed first; other spaces must be the benchmark's
  // engine's.
  ASSIGN_OR_RETURN(const int engine, EngineFor(uri));
  ActionSpaceRef ref = action_spaces_[space];
  bool space_changed = space != 0;  // a non-default space goes back in new_action_space
  if (ref.engine != engine) {
    if (space != 0) {
      std::vector<std::string> names;
      for (const NamedActionSpace& s : engines_[engine]->ActionSpaces()) names.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "Action space ", ref.proto.name(), " does not apply to ", uri, ": it is ",
          engines_[ref.engine]->name(), "'s, and that benchmark is served by ",
          engines_[engine]->name(), ", whose action spaces are ", absl::StrJoin(names, ", ")));
    }
    for (const ActionSpaceRef& r : action_spaces_) {
      if (r.engine == engine && r.index == 0) ref = r;
    }
    space_changed = true;
  }
  if (space_changed) *reply.mutable_new_action_space() = ref.proto;
  ASSIGN_OR_RETURN(Attempt attempt, BeginAttempt(call));
  if (attempt.session != nullptr) {
    // Sent again (the first reply was lost): the session the first attempt made.
    absl::MutexLock lock(&attempt.session->mu);
    RETURN_IF_ERROR(Observe(*attempt.session->episode, request.observation_space(),
                            *reply.mutable_observation()));
    reply.set_session_id(attempt.id);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(sessions_.CheckRoomFor(call.owner));  // before any work is done for it
  EpisodeRequest episode_request{uri, ref.index, [&](const std::string& benchmark) {
                                   return benchmarks_.Load(call.client, benchmark);
                                 },
                                 TenantOf(call.owner)};
  ASSIGN_OR_RETURN(std::unique_ptr<Episode> episode,
                   engines_[engine]->NewEpisode(episode_request));
  episode->set_tenant(TenantOf(call.owner));  // kernels queue fairly per client
  auto session = std::make_shared<Session>(uri, std::move(episode));
  {
    absl::MutexLock lock(&session->mu);
    RETURN_IF_ERROR(
        Observe(*session->episode, request.observation_space(), *reply.mutable_observation()));
  }
  ASSIGN_OR_RETURN(const int64_t id, sessions_.Add(std::move(session), call.owner, absl::Now()));
  attempt.claim.Finish(id, absl::Now());
  reply.set_session_id(id);
  return absl::OkStatus();
}

absl::Status LoopToolService::ForkSession(const CallContext& call,
                                          const compiler_gym::ForkSessionRequest& request,
                                          compiler_gym::ForkSessionReply& reply) {
  return Guarded([&] { return DoForkSession(call, request, reply); });
}

absl::Status LoopToolService::DoForkSession(const CallContext& call,
                                            const compiler_gym::ForkSessionRequest& request,
                                            compiler_gym::ForkSessionReply& reply) {
  ASSIGN_OR_RETURN(std::shared_ptr<Session> parent,
                   sessions_.Find(request.session_id(), absl::Now()));
  ASSIGN_OR_RETURN(Attempt attempt, BeginAttempt(call));
  if (attempt.session != nullptr) {  // sent again: the fork the first attempt made
    reply.set_session_id(attempt.id);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(sessions_.CheckRoomFor(call.owner));  // before the parent is copied
  std::unique_ptr<Episode> episode;
  {
    absl::MutexLock lock(&parent->mu);
    episode = parent->episode->Clone();
  }
  episode->set_tenant(TenantOf(call.owner));  // the forker's, before any other thread sees it
  ASSIGN_OR_RETURN(const int64_t id,
                   sessions_.Add(std::make_shared<Session>(parent->benchmark, std::move(episode)),
                                 call.owner, absl::Now()));
  attempt.claim.Finish(id, absl::Now());
  reply.set_session_id(id);
  return absl::OkStatus();
}

absl::Status LoopToolService::EndSession(const compiler_gym::EndSessionRequest& request,
                                         compiler_gym::EndSessionReply& reply) {
  return Guarded([&] {
    reply.set_remaining_sessions(sessions_.End(request.session_id()));
    return absl::OkStatus();
  });
}

absl::Status LoopToolService::Step(const compiler_gym::StepRequest& request,
                                   compiler_gym::StepReply& reply) {
  return Guarded([&] { return DoStep(request, reply); });
}

absl::Status LoopToolService::DoStep(const compiler_gym::StepRequest& request,
                                     compiler_gym::StepReply& reply) {
  ASSIGN_OR_RETURN(std::shared_ptr<Session> session,
                   sessions_.Find(request.session_id(), absl::Now()));
  absl::MutexLock lock(&session->mu);
  return DoStepLocked(*session, request, reply);
}

absl::Status LoopToolService::DoStepLocked(Session& session,
                                           const compiler_gym::StepRequest& request,
                                           compiler_gym::StepReply& reply) {
  if (request.action_size() > options_.max_actions_per_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("Too many actions in one step: ", request.action_size(), ", at most ",
                     options_.max_actions_per_step));
  }
  if (request.observation_space_size() > options_.max_observations_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Too many observations requested: at most ", options_.max_observations_per_request));
  }
  // Validate every action and observation index before applying anything, so that a bad
  // request changes nothing.
  for (int32_t index : request.observation_space()) {
    if (index < 0 || index >= static_cast<int>(observation_spaces_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Observation space index out of range: ", index));
    }
  }
  Episode& episode = *session.episode;
  const int64_t num_actions = static_cast<int64_t>(episode.action_names().size());
  std::vector<int64_t> indices;
  for (const compiler_gym::Event& e : request.action()) {
    ASSIGN_OR_RETURN(const int64_t index, ActionIndex(e, episode));
    if (index < 0 || index >= num_actions) {
      return absl::InvalidArgumentError(
          absl::StrCat("Action index ", index, " is out of range for action space ",
                       episode.action_space_name(), " (0..", num_actions - 1, ")"));
    }
    indices.push_back(index);
  }
  // A step is a transaction: the actions apply to a copy of the episode, the observations are
  // computed on it, and only when all of that succeeded does the copy become the session's state
  // (a failed step, a kernel that could not be measured included, changes nothing).
  std::unique_ptr<Episode> next = indices.empty() ? nullptr : episode.Clone();
  Episode& stepped = next ? *next : episode;
  bool no_effect = true;
  for (int64_t index : indices) {
    ASSIGN_OR_RETURN(const bool effect, stepped.Act(index));
    no_effect = no_effect && !effect;
  }
  google::protobuf::RepeatedPtrField<compiler_gym::Event> observations;
  RETURN_IF_ERROR(Observe(stepped, request.observation_space(), observations));
  if (next) session.episode = std::move(next);
  reply.set_action_had_no_effect(no_effect);
  reply.set_end_of_session(false);
  reply.mutable_observation()->Swap(&observations);
  return absl::OkStatus();
}

absl::Status LoopToolService::Observe(
    const Episode& episode,
    const google::protobuf::RepeatedField<int32_t>& indices,
    google::protobuf::RepeatedPtrField<compiler_gym::Event>& out) const {
  for (int32_t index : indices) {
    if (index < 0 || index >= static_cast<int>(observation_spaces_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Observation space index out of range: ", index));
    }
    ASSIGN_OR_RETURN(const Observation o, episode.Observe(observation_spaces_[index].space.name));
    *out.Add() = ToEvent(o);
  }
  return absl::OkStatus();
}

absl::Status LoopToolService::AddBenchmark(const CallContext& call,
                                           const compiler_gym::AddBenchmarkRequest& request,
                                           compiler_gym::AddBenchmarkReply&) {
  return Guarded([&] { return DoAddBenchmark(call, request); });
}

absl::Status LoopToolService::DoAddBenchmark(const CallContext& call,
                                             const compiler_gym::AddBenchmarkRequest& request) {
  if (request.benchmark_size() > options_.max_benchmarks_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Too many benchmarks in one request: at most ", options_.max_benchmarks_per_request));
  }
  for (const compiler_gym::Benchmark& b : request.benchmark()) {
    if (b.program().data_case() == compiler_gym::File::kUri) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Benchmark ", b.uri(), ": File.uri is not supported; send the program text in "
          "program.contents"));
    }
    if (b.program().data_case() == compiler_gym::File::DATA_NOT_SET ||
        b.program().contents().empty()) {
      // CompilerGym's client falls back to AddBenchmark with whatever it has for an unknown
      // URI: with no program, the benchmark simply does not exist here.
      RETURN_IF_ERROR(benchmarks_.Load(call.client, b.uri()).status());
      continue;
    }
    RETURN_IF_ERROR(benchmarks_.Add(call.client, call.owner, b.uri(), b.program().contents()));
  }
  return absl::OkStatus();
}

absl::Status LoopToolService::SendSessionParameter(
    const CallContext& call, const compiler_gym::SendSessionParameterRequest& request,
    compiler_gym::SendSessionParameterReply& reply) {
  return Guarded([&] { return DoSendSessionParameter(call, request, reply); });
}

absl::Status LoopToolService::DoSendSessionParameter(
    const CallContext& call, const compiler_gym::SendSessionParameterRequest& request,
    compiler_gym::SendSessionParameterReply& reply) {
  if (request.parameter_size() > options_.max_parameters_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Too many parameters in one request: at most ", options_.max_parameters_per_request));
  }
  // Keys about the service's datasets need no session; the others are the session's.
  std::shared_ptr<Session> session;
  for (const compiler_gym::SessionParameter& p : request.parameter()) {
    const std::string& key = p.key();
    if (std::optional<absl::StatusOr<std::string>> answer = DatasetParameter(key, p.value())) {
      RETURN_IF_ERROR(answer->status());
      reply.add_reply(**std::move(answer));
      continue;
    }
    if (session == nullptr) {
      ASSIGN_OR_RETURN(session, sessions_.Find(request.session_id(), absl::Now()));
    }
    if (key == "service.benchmark_cache.set_max_size_in_bytes") {
      int64_t bytes = 0;
      if (!ParseDecimal(p.value(), &bytes)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Parameter ", key, " needs a byte count, got '", p.value(), "'"));
      }
      // The caller's own cache only: other clients' benchmarks stay.
      reply.add_reply(absl::StrCat(benchmarks_.set_max_size_in_bytes(call.client, call.owner, bytes)));
    } else if (key == "service.benchmark_cache.get_max_size_in_bytes") {
      reply.add_reply(absl::StrCat(benchmarks_.max_size_in_bytes(call.client)));
    } else if (key == "service.benchmark_cache.get_size_in_bytes") {
      reply.add_reply(absl::StrCat(benchmarks_.size_in_bytes(call.client)));
    } else if (key == "looptool.benchmark") {
      reply.add_reply(session->benchmark);
    } else if (key == "looptool.remeasure") {
      // The current kernel timed again with the full budget (searches re-time their winners),
      // then the FMA peak measured on its core right after it (0 where none was measured).
      absl::MutexLock lock(&session->mu);
      ASSIGN_OR_RETURN(const Measurement m, session->episode->Remeasure());
      reply.add_reply(absl::StrFormat("%.17g", m.gflops));
      reply.add_reply(absl::StrFormat("%.17g", m.peak_gflops));
    } else if (options_.parameter_handler) {
      absl::MutexLock lock(&session->mu);
      ASSIGN_OR_RETURN(std::string answer,
                       options_.parameter_handler(*session->episode, key, p.value()));
      reply.add_reply(std::move(answer));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("Unknown parameter: ", key));
    }
  }
  return absl::OkStatus();
}

std::optional<absl::Status> LoopToolService::StepIfQuick(const compiler_gym::StepRequest& request,
                                                         compiler_gym::StepReply& reply) {
  if (IsSlow(request.observation_space())) return std::nullopt;  // compiles, may wait
  absl::StatusOr<std::shared_ptr<Session>> session =
      sessions_.Find(request.session_id(), absl::Now());
  if (!session.ok()) return session.status();
  Session& s = **session;
  if (!s.mu.TryLock()) return std::nullopt;  // busy with another call: may wait
  absl::Status status = Guarded([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return DoStepLocked(s, request, reply);
  });
  s.mu.Unlock();
  return status;
}

bool LoopToolService::IsSlow(const google::protobuf::RepeatedField<int32_t>& indices) const {
  for (int32_t index : indices) {
    if (index >= 0 && index < static_cast<int>(observation_spaces_.size()) &&
        observation_spaces_[index].slow) {
      return true;
    }
  }
  return false;
}

int LoopToolService::EndSessionsOf(const std::string& owner, absl::Time since) {
  return sessions_.EndOwnedBy(owner, since);
}

int LoopToolService::ReapIdleSessions(absl::Duration timeout) {
  return sessions_.ReapIdle(absl::Now(), timeout);
}

}  // namespace looptool::service
