// Connection: a channel to a LoopTool (or any CompilerGym-protocol) server, with the spaces it
// declared and a deadline on every call. Calls wait for the channel to (re)connect within their
// deadline instead of failing at once (wait_for_ready), so a restarted server or a dropped
// connection is ridden out. Shared by every Env of one client; thread-safe.
//
// Retries are gRPC's, set by the channel's service config (service_config.h: the one rule both
// clients use): a call that fails UNAVAILABLE (a connection that broke under it, a server that
// restarted) is sent again, up to 4 attempts in all with backoff from 50 ms to 400 ms, within
// its deadline. That policy covers GetVersion, GetSpaces, StartSession, ForkSession, EndSession,
// AddBenchmark and SendSessionParameter, and never Step: a step applies actions and must not run
// twice. StartSession and ForkSession do retry: each call carries its own request id
// (looptool-request-id), which a retry resends, so when the connection broke after the server
// ran the call, the retry gets the session the first attempt made instead of a second one.
// (gRPC also retries, transparently, any call that never
// reached the server, Step included.)
#ifndef LOOPTOOL_CLIENT_CPP_CONNECTION_H_
#define LOOPTOOL_CLIENT_CPP_CONNECTION_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "proto/compiler_gym_service.grpc.pb.h"

namespace looptool::client {

// absl::Status of a gRPC status (the codes share their numbering).
absl::Status FromGrpc(const grpc::Status& status);

// A dataset the server resolves (its looptool.datasets parameter).
struct DatasetInfo {
  std::string name;  // "mm64_256_16_range-v0"
  int64_t size = 0, test_size = 0;
  std::string description;
};

struct ConnectionOptions {
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration call_timeout = absl::Seconds(60);
  std::string auth_token;         // sent with every call as "authorization: Bearer <token>"
  std::string tls_root_certs;     // PEM: connect over TLS, trusting these roots; empty: plain
  std::string tls_server_name;    // the name the certificate must carry (default: the host)
};

class Connection {
 public:
  // Connects to "host:port" and fetches the spaces and the version. UNAVAILABLE when no server answers within
  // `connect_timeout`; UNAUTHENTICATED when it wants a token we do not have.
  static absl::StatusOr<std::shared_ptr<Connection>> Connect(const std::string& address,
                                                             ConnectionOptions options);
  static absl::StatusOr<std::shared_ptr<Connection>> Connect(
      const std::string& address, absl::Duration connect_timeout = absl::Seconds(10),
      absl::Duration call_timeout = absl::Seconds(60));

  compiler_gym::CompilerGymService::Stub& stub() { return *stub_; }
  const std::string& address() const { return address_; }
  const compiler_gym::GetSpacesReply& spaces() const { return spaces_; }
  // The server's GetVersion compiler_version ("LoopTool 0.1 (host: AMD EPYC 9R14)"), and the CPU
  // its kernels are timed on, read from it ("unknown CPU" for servers that do not say).
  const std::string& compiler_version() const { return compiler_version_; }
  std::string host_cpu() const;

  // Runs `call(context)` (a stub call returning grpc::Status) with a context from Context():
  // the default call timeout, or `timeout` when given. Retrying is the channel's (see above).
  // `wait_for_ready` false: fail at once (UNAVAILABLE) while the server cannot be reached.
  template <typename Call>
  absl::Status Invoke(Call call, absl::Duration timeout = absl::ZeroDuration(),
                      bool wait_for_ready = true) const {
    auto ctx = Context(timeout == absl::ZeroDuration() ? call_timeout_ : timeout, wait_for_ready);
    return Heard(FromGrpc(call(ctx.get())));
  }

  // Notes how a call ended (for unanswered()) and returns `status`: Invoke's calls, and calls
  // made otherwise (Env::CloseAll's, sent at once).
  absl::Status Heard(absl::Status status) const {
    unanswered_.store(status.code() == absl::StatusCode::kDeadlineExceeded ||
                          status.code() == absl::StatusCode::kUnavailable,
                      std::memory_order_relaxed);
    return status;
  }

  // Whether the last call (of any thread) ran out of time or found no server: then Env::Close
  // waits only briefly, so that the sessions of a server that has gone cost little to abandon.
  bool unanswered() const { return unanswered_.load(std::memory_order_relaxed); }

  // The timeout of a call that must end by `deadline` (at most the default call timeout).
  absl::Duration TimeoutUntil(absl::Time deadline) const {
    return std::max(std::min(call_timeout_, deadline - absl::Now()), absl::Milliseconds(1));
  }

  // A context for one call, with the default deadline or `timeout`, waiting for readiness, and
  // this connection's client id, a fresh request id and the token as metadata.
  std::unique_ptr<grpc::ClientContext> Context() const;
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout,
                                               bool wait_for_ready = true) const;

  // The server's datasets, and the URIs of one's benchmarks in `split` ("all", "train" or
  // "test"), as the server lists them (the split is the server's, never mirrored here).
  // NOT_FOUND for an unknown dataset, INVALID_ARGUMENT for an unknown split.
  absl::StatusOr<std::vector<DatasetInfo>> Datasets() const;
  absl::StatusOr<std::vector<std::string>> DatasetBenchmarks(const std::string& dataset,
                                                             const std::string& split) const;

  // Index of the named observation space; NOT_FOUND when the server has none.
  absl::StatusOr<int> ObservationIndex(const std::string& name) const;
  // The names of the named action space, in index order; NOT_FOUND when there is none.
  absl::StatusOr<std::vector<std::string>> ActionNames(const std::string& space) const;
  absl::StatusOr<int> ActionSpaceIndex(const std::string& space) const;

 private:
  Connection() = default;
  // A SendSessionParameter the server answers without a session: its one reply.
  absl::StatusOr<std::string> ServiceParameter(const std::string& key,
                                               const std::string& value) const;
  std::string address_;
  absl::Duration call_timeout_;
  std::string client_id_;  // random: the server keys this client's benchmarks by it
  std::string auth_token_;
  std::unique_ptr<compiler_gym::CompilerGymService::Stub> stub_;
  compiler_gym::GetSpacesReply spaces_;
  std::string compiler_version_;
  mutable std::atomic<bool> unanswered_{false};
  mutable std::atomic<uint64_t> next_request_{0};  // ids of this client's calls
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_CONNECTION_H_
