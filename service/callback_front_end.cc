#include "service/callback_front_end.h"

#include <functional>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace looptool::service {
namespace {

namespace cg = compiler_gym;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Comparison whose time does not depend on where the strings first differ.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

CallContext ContextOf(const grpc::CallbackServerContext& context, const Caller& caller) {
  CallContext call;
  call.owner = caller.owner;
  auto id = context.client_metadata().find(kClientIdMetadata);
  if (id != context.client_metadata().end() && !id->second.empty() && id->second.size() <= 128) {
    call.client = absl::StrCat("id:", absl::string_view(id->second.data(), id->second.size()));
  } else {
    call.client = absl::StrCat("peer:", caller.connection);
  }
  auto request = context.client_metadata().find(kRequestIdMetadata);
  if (request != context.client_metadata().end() && request->second.size() <= 64) {
    call.request_id = std::string(request->second.data(), request->second.size());
  }
  return call;
}

// One call's request and reply, alive until the call finishes (possibly on another thread).
template <typename Request, typename Reply>
struct CallState {
  CallContext call;
  Request request;
  Reply reply;
};

}  // namespace

std::optional<std::string> CallbackFrontEnd::Admit(const Context& context) const {
  auto it = context.client_metadata().find(kAuthMetadata);
  const absl::string_view sent = it == context.client_metadata().end()
                                     ? absl::string_view()
                                     : absl::string_view(it->second.data(), it->second.size());
  // Every token is compared, whichever matches: the time taken says nothing of which.
  std::optional<std::string> user;
  for (const ClientToken& t : admission_.client_tokens) {
    if (SameSecret(sent, absl::StrCat("Bearer ", t.token))) user = t.name;
  }
  if (user.has_value()) return user;
  if (admission_.auth_token.empty() && admission_.client_tokens.empty()) return std::string();
  if (!admission_.auth_token.empty() &&
      SameSecret(sent, absl::StrCat("Bearer ", admission_.auth_token))) {
    return std::string();
  }
  return std::nullopt;
}

template <typename Request, typename Reply, typename Call>
grpc::ServerUnaryReactor* CallbackFrontEnd::Serve(Context* context, const grpc::ByteBuffer* in,
                                                  grpc::ByteBuffer* out, int64_t limit, Mode mode,
                                                  Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ++in_flight_;
  std::function<void(const grpc::Status&)> finish = [this, reactor](const grpc::Status& status) {
    reactor->Finish(status);
    --in_flight_;
  };
  const std::optional<std::string> user = Admit(*context);
  if (!user.has_value()) {
    finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "This server requires a token: send metadata 'authorization: Bearer "
                        "<token>' (looptool --auth_token_file)"));
    return reactor;
  }
  const int64_t bytes = static_cast<int64_t>(in->Length());
  if (bytes > limit) {
    finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat(Request::descriptor()->name(), " of ", bytes,
                     " bytes is larger than this server accepts for it (", limit, " bytes)")));
    return reactor;
  }
  auto state = std::make_shared<CallState<Request, Reply>>();
  const Caller caller = connections_.Identify(context->peer(), *user, absl::Now());
  state->call = ContextOf(*context, caller);
  // From here on the call runs on its connection (which is then not evicted as idle) until
  // answered.
  finish = [this, reactor, caller](const grpc::Status& status) {
    connections_.CallEnded(caller, absl::Now());
    reactor->Finish(status);
    --in_flight_;
  };
  {
    grpc::ByteBuffer copy(*in);  // shares the slices
    grpc::ProtoBufferReader reader(&copy);
    if (!state->request.ParseFromZeroCopyStream(&reader)) {
      finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("Malformed ", Request::descriptor()->name())));
      return reactor;
    }
  }
  auto complete = [out, state, finish](const absl::Status& status) {
    if (status.ok()) {
      bool own = false;
      grpc::Status s = grpc::SerializationTraits<Reply>::Serialize(state->reply, out, &own);
      finish(s);
    } else {
      finish(ToGrpc(status));
    }
  };
  if (mode == Mode::kInline) {
    complete(call(*state));
    return reactor;
  }
  if constexpr (std::is_same_v<Request, cg::StartSessionRequest>) {
    // Starting a session is cheap unless it asks for a slow observation.
    if (mode == Mode::kStart && !service_.IsSlow(state->request.observation_space())) {
      complete(call(*state));
      return reactor;
    }
  }
  if constexpr (std::is_same_v<Request, cg::StepRequest>) {
    if (mode == Mode::kStep) {
      if (std::optional<absl::Status> quick = service_.StepIfQuick(state->request, state->reply)) {
        complete(*quick);
        return reactor;
      }
    }
  }
  const absl::Status queued =
      pool_.Schedule(state->call.owner, [state, call, complete, context] {
        // A client that gave up while the call waited in line gets nothing done for it (no
        // session it would never learn about).
        complete(context->IsCancelled() ? absl::CancelledError("The client cancelled the call")
                                        : call(*state));
      });
  if (!queued.ok()) finish(ToGrpc(queued));
  return reactor;
}

#define LOOPTOOL_SERVE(NAME, LIMIT, MODE, EXPR)                                                   \
  grpc::ServerUnaryReactor* CallbackFrontEnd::NAME(Context* c, const grpc::ByteBuffer* q,        \
                                                   grpc::ByteBuffer* r) {                        \
    return Serve<cg::NAME##Request, cg::NAME##Reply>(                                            \
        c, q, r, LIMIT, MODE, [this](CallState<cg::NAME##Request, cg::NAME##Reply>& s) {         \
          (void)s.call;                                                                          \
          return EXPR;                                                                           \
        });                                                                                      \
  }

LOOPTOOL_SERVE(GetVersion, limits_.small, Mode::kInline, service_.GetVersion(s.request, s.reply))
LOOPTOOL_SERVE(GetSpaces, limits_.small, Mode::kInline, service_.GetSpaces(s.request, s.reply))
LOOPTOOL_SERVE(StartSession, limits_.start_session, Mode::kStart,
               service_.StartSession(s.call, s.request, s.reply))
// Forking waits for the parent's lock, which a timing step may hold.
LOOPTOOL_SERVE(ForkSession, limits_.small, Mode::kPool,
               service_.ForkSession(s.call, s.request, s.reply))
LOOPTOOL_SERVE(EndSession, limits_.small, Mode::kInline, service_.EndSession(s.request, s.reply))
LOOPTOOL_SERVE(Step, limits_.step, Mode::kStep, service_.Step(s.request, s.reply))
// Parsing at most 64 programs of 16 KiB: cheap.
LOOPTOOL_SERVE(AddBenchmark, limits_.add_benchmark, Mode::kInline,
               service_.AddBenchmark(s.call, s.request, s.reply))
// May wait for the session's lock (the test hook's parameter).
LOOPTOOL_SERVE(SendSessionParameter, limits_.send_session_parameter, Mode::kPool,
               service_.SendSessionParameter(s.call, s.request, s.reply))

#undef LOOPTOOL_SERVE

}  // namespace looptool::service
