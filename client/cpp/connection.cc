#include "client/cpp/connection.h"

#include <sys/random.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/cpp/service_config.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "util/status_macros.h"

namespace looptool::client {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::StatusOr<std::shared_ptr<Connection>> Connection::Connect(const std::string& address,
                                                                absl::Duration connect_timeout,
                                                                absl::Duration call_timeout) {
  ConnectionOptions options;
  options.connect_timeout = connect_timeout;
  options.call_timeout = call_timeout;
  return Connect(address, std::move(options));
}

absl::StatusOr<std::shared_ptr<Connection>> Connection::Connect(const std::string& address,
                                                                ConnectionOptions options) {
  std::shared_ptr<Connection> c(new Connection());
  c->address_ = address;
  c->call_timeout_ = options.call_timeout;
  c->auth_token_ = options.auth_token;
  uint64_t id[2];
  if (getrandom(id, sizeof(id), 0) != sizeof(id)) {
    return absl::InternalError("cannot draw a client id: getrandom failed");
  }
  c->client_id_ = absl::StrCat(absl::Hex(id[0], absl::kZeroPad16), absl::Hex(id[1], absl::kZeroPad16));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Retries are on by default in gRPC 1.51; say so, and keep a config the server's name might
  // resolve to (DNS TXT records) from replacing ours.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  args.SetServiceConfigJSON(std::string(ClientServiceConfigJson()));
  // A server that comes back is reached within a second (gRPC's reconnect backoff otherwise
  // grows to two minutes); the Python client sets the same.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_root_certs.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  c->stub_ = compiler_gym::CompilerGymService::NewStub(
      grpc::CreateCustomChannel(address, credentials, args));
  const grpc::Status s =
      c->stub_->GetSpaces(c->Context(options.connect_timeout).get(), {}, &c->spaces_);
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) return FromGrpc(s);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach a LoopTool server at ", address, ": ", s.error_message()));
  }
  compiler_gym::GetVersionReply version;
  if (c->stub_->GetVersion(c->Context(options.connect_timeout).get(), {}, &version).ok()) {
    c->compiler_version_ = version.compiler_version();
  }
  return c;
}

std::string Connection::host_cpu() const {
  static constexpr char kHost[] = "(host: ";
  constexpr size_t kHostSize = sizeof(kHost) - 1;
  const size_t at = compiler_version_.rfind(kHost);
  const size_t end = compiler_version_.rfind(')');
  if (at == std::string::npos || end == std::string::npos || end < at + kHostSize) {
    return "unknown CPU";
  }
  return compiler_version_.substr(at + kHostSize, end - at - kHostSize);
}

std::unique_ptr<grpc::ClientContext> Connection::Context() const { return Context(call_timeout_); }

std::unique_ptr<grpc::ClientContext> Connection::Context(absl::Duration timeout,
                                                         bool wait_for_ready) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(wait_for_ready);
  ctx->AddMetadata("looptool-client-id", client_id_);
  // One id per call, which the channel's retries resend: a StartSession or ForkSession that ran
  // but whose reply was lost returns the session it made instead of making a second.
  ctx->AddMetadata("looptool-request-id",
                   absl::StrCat(next_request_.fetch_add(1, std::memory_order_relaxed)));
  if (!auth_token_.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", auth_token_));
  return ctx;
}

absl::StatusOr<int> Connection::ObservationIndex(const std::string& name) const {
  for (int i = 0; i < spaces_.observation_space_list_size(); ++i) {
    if (spaces_.observation_space_list(i).name() == name) return i;
  }
  return absl::NotFoundError(absl::StrCat("the server has no observation space '", name, "'"));
}

absl::StatusOr<int> Connection::ActionSpaceIndex(const std::string& space) const {
  for (int i = 0; i < spaces_.action_space_list_size(); ++i) {
    if (spaces_.action_space_list(i).name() == space) return i;
  }
  return absl::NotFoundError(absl::StrCat("the server has no action space '", space, "'"));
}

absl::StatusOr<std::vector<std::string>> Connection::ActionNames(const std::string& space) const {
  ASSIGN_OR_RETURN(const int i, ActionSpaceIndex(space));
  const auto& names = spaces_.action_space_list(i).space().named_discrete().name();
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::string> Connection::ServiceParameter(const std::string& key,
                                                         const std::string& value) const {
  compiler_gym::SendSessionParameterRequest request;
  compiler_gym::SessionParameter* p = request.add_parameter();
  p->set_key(key);
  p->set_value(value);
  compiler_gym::SendSessionParameterReply reply;
  RETURN_IF_ERROR(Invoke([&](grpc::ClientContext* ctx) {
    return stub_->SendSessionParameter(ctx, request, &reply);
  }));
  if (reply.reply_size() != 1) {
    return absl::InternalError(absl::StrCat("the server answered ", key, " with ",
                                            reply.reply_size(), " replies, not one"));
  }
  return reply.reply(0);
}

absl::StatusOr<std::vector<DatasetInfo>> Connection::Datasets() const {
  ASSIGN_OR_RETURN(const std::string text, ServiceParameter("looptool.datasets", ""));
  std::vector<DatasetInfo> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    DatasetInfo d;
    if (f.size() != 4 || !absl::SimpleAtoi(f[1], &d.size) || !absl::SimpleAtoi(f[2], &d.test_size)) {
      return absl::InternalError(absl::StrCat("the server's dataset line '", line,
                                              "' is not '<name> <size> <test size> <description>'"));
    }
    d.name = std::string(f[0]);
    d.description = std::string(f[3]);
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Connection::DatasetBenchmarks(
    const std::string& dataset, const std::string& split) const {
  ASSIGN_OR_RETURN(const std::string text, ServiceParameter("looptool.dataset_benchmarks",
                                                           absl::StrCat(dataset, ":", split)));
  return std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()));
}

}  // namespace looptool::client
