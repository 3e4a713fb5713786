#include "client/cpp/connection.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

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
  return c;
}

std::unique_ptr<grpc::ClientContext> Connection::Context() const { return Context(call_timeout_); }

std::unique_ptr<grpc::ClientContext> Connection::Context(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(true);
  ctx->AddMetadata("looptool-client-id", client_id_);
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
  absl::StatusOr<int> i = ActionSpaceIndex(space);
  if (!i.ok()) return i.status();
  const auto& names = spaces_.action_space_list(*i).space().named_discrete().name();
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace looptool::client
