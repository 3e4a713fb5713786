// LoopToolServer: a running gRPC server with the LoopTool service, its kernel workers and its
// idle-session reaper. The looptool-server binary runs one; the CLI embeds one on loopback.
#ifndef LOOPTOOL_SERVICE_SERVER_H_
#define LOOPTOOL_SERVICE_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backend/timing/worker_pool.h"
#include "grpcpp/server.h"
#include "service/callback_front_end.h"
#include "service/compiler_gym_service.h"
#include "service/connection_listener.h"
#include "service/connection_table.h"
#include "service/thread_pool.h"
#include "util/auth_token.h"

namespace looptool::service {

// gRPC transport bounds per connection (see LoopToolServer::Start).
struct TransportLimits {
  // Concurrent streams per connection: few, so that a connection flooding streams it never
  // finishes costs the server little (bench/results/adversarial_soak.md); a client with more
  // calls at once on one connection waits for a stream in its own gRPC.
  int max_streams = 16;
  absl::Duration handshake_timeout = absl::Seconds(10);  // to the end of HTTP/2's preface
  absl::Duration max_connection_idle = absl::Minutes(10);  // no call for this long: closed
  // LoopTool's listener only: a connection with a request whose message has not all arrived
  // this long after its headers is closed (a call gRPC would otherwise keep for ever).
  absl::Duration request_timeout = absl::Seconds(60);
  absl::Duration keepalive_time = absl::Minutes(1);   // ping a connection idle this long ...
  absl::Duration keepalive_timeout = absl::Seconds(20);  // ... and close it if no answer
  // Open connections at most (with ServerConfig::manage_connections): at the cap a new one
  // closes the connection idle longest. Lowered at start to what the descriptor limit allows
  // (three descriptors a connection, 256 kept for the rest).
  int max_connections = 4096;
};

struct ServerConfig {
  std::string bind = "127.0.0.1";
  int port = 0;                                  // 0: pick a free port
  ServiceOptions service;
  WorkerPool::Options workers;                   // cores empty: the last CPU we may run on
  absl::Duration session_idle_timeout = absl::Hours(1);
  // Accept a plaintext server's connections in a ConnectionListener instead of gRPC's listener:
  // connections are capped (transport.max_connections), a descriptor shortage sheds connections
  // instead of stopping the listener, every client is held to transport.max_streams whether it
  // acknowledged the server's SETTINGS or not, and a client's sessions end `client_gone_grace`
  // after its last connection closed, unless it called again meanwhile (its client is a
  // per-client token's user, else the connection itself). A TLS server always uses gRPC's
  // listener (the handshake is gRPC's).
  bool manage_connections = true;
  absl::Duration client_gone_grace = absl::Seconds(30);
  // For calls that may wait (timing, forks), queued and run per client in turn; beyond its
  // bounds: RESOURCE_EXHAUSTED.
  ThreadPool::Options blocking_pool;
  RequestLimits request_limits;                  // per RPC; the transport refuses the largest+
  size_t max_memory_bytes = size_t{1} << 30;     // gRPC's buffers for calls in flight
  TransportLimits transport;
  absl::Duration drain = absl::Seconds(5);       // Shutdown's grace on SIGTERM (server_cli)
  // List upstream loop_tool-v0's action spaces (simple, split) before LoopTool's in GetSpaces,
  // for CompilerGym clients that take the first space as the default before their first reset
  // (compiler_gym.make("loop_tool-v0", service=...)) or after a fork.
  bool upstream_spaces_first = false;
  // Wraps the kernel timer the sessions use (an extension point: tests install a fault injector
  // around the pool). Null: the pool itself.
  std::function<std::shared_ptr<KernelTimer>(std::shared_ptr<WorkerPool>)> wrap_timer;
  // Required of every call when set (the shared token, or any of the per-client tokens, which
  // also name the client: see Admission). A server bound to anything but loopback must have one.
  std::string auth_token;
  std::vector<ClientToken> client_tokens;
  // TLS: PEM files of the server's certificate chain and private key; both or neither.
  std::string tls_cert_file, tls_key_file;
};

// Whether `bind` is a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104, with or without
// IPv6 brackets) or "localhost". Any other name is not, whatever it resolves to.
bool IsLoopback(const std::string& bind);

class LoopToolServer {
 public:
  // Starts the kernel workers (measuring the peak) and starts listening. It changes nothing
  // process-wide: the binary's main pins its threads (PinAwayFrom) and turns on gRPC's health
  // and reflection services (EnableHealthAndReflection) before calling it. INVALID_ARGUMENT for
  // a non-loopback bind without an auth token, or unreadable TLS files.
  static absl::StatusOr<std::unique_ptr<LoopToolServer>> Start(ServerConfig config);
  ~LoopToolServer();

  int port() const { return port_; }
  std::string address() const;  // "<bind>:<port>"
  int open_connections() const { return connections_->open(); }
  double peak_gflops() const { return pool_->PeakGflops().value_or(0); }
  const std::vector<int>& eval_cores() const { return eval_cores_; }

  // Waits until no call is in flight or `grace` has passed (calls arriving meanwhile are still
  // served, so a steady stream waits out the grace), then shuts gRPC down at once: calls still
  // running are cancelled, idle client connections do not hold it up, calls queued for the
  // blocking pool are dropped, and the kernel worker processes end (WorkerPool::Stop, whoever
  // else holds the pool): running kernels are abandoned and later kernel requests fail
  // UNAVAILABLE at once, so what remains after the grace is bounded by the calls' own work
  // outside kernels. The first call does the work; later calls (also concurrent ones) return
  // at once.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  LoopToolServer() = default;
  void ReaperLoop(absl::Duration idle_timeout, absl::Duration grace);

  int port_ = 0;
  std::string bind_;
  std::vector<int> eval_cores_;
  std::shared_ptr<WorkerPool> pool_;
  std::unique_ptr<ConnectionTable> connections_;
  std::unique_ptr<ConnectionListener> listener_;  // null: gRPC's listener
  std::unique_ptr<LoopToolService> service_;
  std::unique_ptr<ThreadPool> blocking_pool_;
  std::unique_ptr<CallbackFrontEnd> front_end_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus();
// The kernel worker's core when none is given: the last CPU we may run on (-1, unpinned, when
// there is only one).
std::vector<int> DefaultEvalCores();
// Pins the calling thread, and so the threads it starts from then on, to the allowed CPUs other
// than `eval_cores` (nothing when no other is left), so the server's own threads never disturb
// a kernel being timed.
void PinAwayFrom(const std::vector<int>& eval_cores);
// gRPC's process-wide switches for the servers built after it: the health service (SERVING for
// "" and CompilerGymService) and server reflection.
void EnableHealthAndReflection();
// Raises the process's soft limit on open descriptors to its hard limit and returns the limit
// now in force. A listener that runs out of descriptors stops accepting for good (gRPC's own
// failure: grpc/grpc issues 16058 and 20418), and a killed kernel worker cannot be replaced;
// the common soft limit of 1,024 is reached by 1,000 idle connections.
int64_t RaiseDescriptorLimit();

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_SERVER_H_
