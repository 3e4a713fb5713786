#include "service/server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "backend/compat/loop_tool_v0_engine.h"
#include "backend/costmodel/learned_cost_model.h"
#include "backend/costmodel/learning_timer.h"
#include "backend/env/loop_tree_engine.h"
#include "backend/timing/host_cpu.h"
#include "util/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_posix.h"
#include "grpcpp/security/server_credentials.h"

namespace looptool::service {

void PinAwayFrom(const std::vector<int>& eval_cores) {
  std::vector<int> rest;
  for (int cpu : AllowedCpus()) {
    bool eval = false;
    for (int c : eval_cores) eval = eval || c == cpu;
    if (!eval) rest.push_back(cpu);
  }
  if (rest.empty()) return;  // one core: nothing to keep apart
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : rest) CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

std::vector<int> DefaultEvalCores() {
  const std::vector<int> cpus = AllowedCpus();
  return {cpus.size() > 1 ? cpus.back() : -1};
}

void EnableHealthAndReflection() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

int64_t RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(limit.rlim_cur);
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerConfig& config) {
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate file and a key file");
  }
  if (config.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadFile(config.tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(config.tls_key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

// `wanted`, lowered to what the descriptor limit allows: two descriptors a connection (gRPC's and
// the listener's watch) and 256 kept for everything else.
int MaxConnections(int wanted) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  // Three descriptors a connection: the client's socket and the relay's socket pair.
  const int64_t allowed = (static_cast<int64_t>(limit.rlim_cur) - 256) / 3;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, allowed)));
}

int ToMilliseconds(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}

}  // namespace

bool IsLoopback(const std::string& bind) {
  if (bind == "localhost") return true;
  std::string host = bind;
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);  // IPv6 only
  // Addresses only, parsed: a name such as "127.evil.example" resolves to anything.
  in_addr v4;
  if (!bracketed && inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<std::unique_ptr<LoopToolServer>> LoopToolServer::Start(ServerConfig config) {
  if (!IsLoopback(config.bind) && config.auth_token.empty() && config.client_tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to listen on ", config.bind, " without a shared token: any host that reaches "
        "it could use it; give --auth_token_file (and --tls_cert_file/--tls_key_file for "
        "encryption), or bind to 127.0.0.1"));
  }
  // TLS handshakes are gRPC's listener's.
  if (!config.tls_cert_file.empty()) config.manage_connections = false;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(config);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<LoopToolServer> s(new LoopToolServer());
  if (config.workers.cores.empty()) config.workers.cores = DefaultEvalCores();
  s->eval_cores_ = config.workers.cores;
  config.workers.max_loops = config.service.limits.max_loops;
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(config.workers);
  if (!pool.ok()) return pool.status();
  s->pool_ = *std::move(pool);
  std::shared_ptr<KernelTimer> measuring =
      config.wrap_timer ? config.wrap_timer(s->pool_) : s->pool_;
  // Every kernel measured teaches the cost model behind predicted_gflops.
  KernelBackend kernels;
  kernels.target = config.workers.isa;
  kernels.codegen.stream_output_min_bytes = config.workers.stream_output_min_bytes;
  auto cost_model = std::make_shared<LearnedCostModel>(kernels.target);
  kernels.timer = std::make_shared<LearningTimer>(std::move(measuring), cost_model);
  kernels.cost_model = std::move(cost_model);
  std::vector<std::shared_ptr<const Engine>> engines = {
      std::make_shared<LoopTreeEngine>(config.service.limits, kernels),
      std::make_shared<compat::LoopToolV0Engine>(kernels.timer)};
  if (config.upstream_spaces_first) config.service.engine_listed_first = engines[1]->name();
  // Clients key what they tune by the CPU it was timed on (client/cpp/schedule_store.h).
  config.service.compiler_version =
      absl::StrCat(config.service.compiler_version, " (host: ", HostCpuModel(), ")");
  s->service_ = std::make_unique<LoopToolService>(config.service, std::move(engines));
  s->blocking_pool_ = std::make_unique<ThreadPool>(config.blocking_pool);
  s->connections_ = std::make_unique<ConnectionTable>(config.client_gone_grace);
  s->front_end_ = std::make_unique<CallbackFrontEnd>(
      *s->service_, *s->blocking_pool_, *s->connections_, config.request_limits,
      Admission{config.auth_token, config.client_tokens});

  grpc::ServerBuilder builder;
  if (config.manage_connections) {
    ConnectionListener::Options listening;
    listening.max_connections = MaxConnections(config.transport.max_connections);
    listening.max_streams = config.transport.max_streams;
    listening.request_timeout = config.transport.request_timeout;
    listening.handshake_timeout = config.transport.handshake_timeout;
    ASSIGN_OR_RETURN(s->listener_, ConnectionListener::Listen(config.bind, config.port,
                                                              listening, *s->connections_));
    s->port_ = s->listener_->port();
  } else {
    builder.AddListeningPort(absl::StrCat(config.bind, ":", config.port),
                             *credentials, &s->port_);
  }
  builder.RegisterService(s->front_end_.get());
  // The transport refuses what no RPC may send; the front end then applies each RPC's own limit
  // before parsing. Replies are bounded by the observations' own sizes.
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.request_limits.largest()));
  builder.SetMaxSendMessageSize(64 << 20);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 512 * 1024);
  // The transport's own bounds (ServerConfig::transport): streams per connection (a client
  // opening streams it never finishes holds at most that many), the handshake, idle
  // connections, and keepalive pings that find dead peers.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config.transport.max_streams);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             ToMilliseconds(config.transport.handshake_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             ToMilliseconds(config.transport.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             ToMilliseconds(config.transport.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             ToMilliseconds(config.transport.keepalive_timeout));
  grpc::ResourceQuota quota("looptool-server");
  quota.Resize(config.max_memory_bytes);  // requests and replies in flight, all together
  builder.SetResourceQuota(quota);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.bind, ":", config.port));
  }
  if (s->listener_) {
    s->listener_->Start(
        [server = s->server_.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  }
  // Health (when the binary enabled it): SERVING for the server as a whole ("") and for the
  // service by name.
  if (grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService()) {
    health->SetServingStatus(compiler_gym::CompilerGymService::service_full_name(), true);
  }
  s->bind_ = config.bind;
  const absl::Duration grace =
      config.manage_connections ? config.client_gone_grace : absl::InfiniteDuration();
  s->reaper_ = std::thread([raw = s.get(), idle = config.session_idle_timeout, grace] {
    raw->ReaperLoop(idle, grace);
  });
  return s;
}

LoopToolServer::~LoopToolServer() { Shutdown(); }

std::string LoopToolServer::address() const { return absl::StrCat(bind_, ":", port_); }

void LoopToolServer::ReaperLoop(absl::Duration idle_timeout, absl::Duration grace) {
  const absl::Duration period = std::max(
      std::min({idle_timeout / 4, grace / 4, absl::Seconds(1)}), absl::Milliseconds(50));
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
    if (stopping_) break;
    service_->ReapIdleSessions(idle_timeout);
    // Clients gone for their grace: the sessions nobody used since they left end (they would
    // hold the client's share until the idle timeout). A client known by its connection that
    // reconnected and went on with its sessions keeps them.
    for (const auto& [owner, left] : connections_->TakeAbandoned(absl::Now())) {
      service_->EndSessionsOf(owner, left);
    }
    // gRPC assembles a request from many small slices before it can refuse it for its size; the
    // allocator keeps those pages after they are freed. Give them back, so that refused
    // requests (or a burst of big replies) do not leave the server's memory raised.
    malloc_trim(0);
  }
}

void LoopToolServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  // No new connections while draining; those open are relayed until gRPC has closed them.
  if (listener_) listener_->StopAccepting();
  if (server_) {
    // gRPC's own drain also waits for idle client connections to go away, for the whole grace
    // period; wait for our calls in flight instead, then shut down without delay.
    const absl::Time deadline = absl::Now() + grace;
    while (front_end_->in_flight() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    // Running kernels are abandoned to their workers (killed), and any kernel a call asks for
    // from now on fails at once: the calls finish without waiting for kernels. (First: gRPC's
    // Shutdown waits for every call to finish.)
    if (pool_) pool_->Stop();
    // Cancels every call still running: those queued for the blocking pool are dropped there.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  if (listener_) listener_->Stop();
  if (pool_) pool_->Stop();  // (a server that never listened)
  blocking_pool_.reset();  // after the server: no call is left to schedule work
  pool_.reset();
}

}  // namespace looptool::service
