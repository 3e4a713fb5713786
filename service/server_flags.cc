#include "service/server_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "util/auth_token.h"
#include "util/status_macros.h"

namespace looptool::service {
namespace {

template <typename T>
bool ParseNumber(absl::string_view text, T* out, std::string* error) {
  bool ok = false;
  if constexpr (std::is_same_v<T, double>) {
    ok = absl::SimpleAtod(text, out);
  } else {
    ok = absl::SimpleAtoi(text, out);
  }
  if (!ok) *error = absl::StrCat("'", text, "' is not a number");
  return ok;
}

}  // namespace

bool AbslParseFlag(absl::string_view text, Positive<double>* out, std::string* error) {
  if (!ParseNumber(text, &out->value, error)) return false;
  if (out->value > 0) return true;
  *error = "must be positive";
  return false;
}
bool AbslParseFlag(absl::string_view text, Positive<int>* out, std::string* error) {
  if (!ParseNumber(text, &out->value, error)) return false;
  if (out->value > 0) return true;
  *error = "must be positive";
  return false;
}
bool AbslParseFlag(absl::string_view text, NonNegative<double>* out, std::string* error) {
  if (!ParseNumber(text, &out->value, error)) return false;
  if (out->value >= 0) return true;
  *error = "must be 0 or more";
  return false;
}
bool AbslParseFlag(absl::string_view text, NonNegative<int64_t>* out, std::string* error) {
  if (!ParseNumber(text, &out->value, error)) return false;
  if (out->value >= 0) return true;
  *error = "must be 0 or more";
  return false;
}
std::string AbslUnparseFlag(const Positive<double>& v) { return absl::StrCat(v.value); }
std::string AbslUnparseFlag(const Positive<int>& v) { return absl::StrCat(v.value); }
std::string AbslUnparseFlag(const NonNegative<double>& v) { return absl::StrCat(v.value); }
std::string AbslUnparseFlag(const NonNegative<int64_t>& v) { return absl::StrCat(v.value); }

bool AbslParseFlag(absl::string_view text, CpuList* out, std::string* error) {
  out->cpus.clear();
  for (absl::string_view c : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int cpu = 0;
    if (!absl::SimpleAtoi(c, &cpu) || cpu < 0) {
      *error = absl::StrCat("takes CPU numbers (0, 1, ...), got '", c, "'");
      return false;
    }
    out->cpus.push_back(cpu);
  }
  return true;
}
std::string AbslUnparseFlag(const CpuList& v) { return absl::StrJoin(v.cpus, ","); }

bool AbslParseFlag(absl::string_view text, TimingMode* out, std::string* error) {
  if (text == "adaptive") {
    *out = TimingMode::kAdaptive;
  } else if (text == "fixed") {
    *out = TimingMode::kFixed;
  } else {
    *error = absl::StrCat("must be adaptive or fixed, got '", text, "'");
    return false;
  }
  return true;
}
std::string AbslUnparseFlag(TimingMode v) {
  return v == TimingMode::kAdaptive ? "adaptive" : "fixed";
}

bool AbslParseFlag(absl::string_view text, IsaChoice* out, std::string* error) {
  absl::StatusOr<Isa> isa = ParseIsa(text);
  if (!isa.ok()) {
    *error = std::string(isa.status().message());
    return false;
  }
  out->name = std::string(text);
  out->isa = *isa;
  return true;
}
std::string AbslUnparseFlag(const IsaChoice& v) { return v.name; }

absl::StatusOr<std::string> AuthTokenFromFlags() {
  const std::string file = absl::GetFlag(FLAGS_auth_token_file);
  if (file.empty()) return std::string();
  return ReadAuthTokenFile(file);
}

absl::StatusOr<ServerConfig> ServerConfigFromFlags() {
  ServerConfig config;
  config.bind = absl::GetFlag(FLAGS_bind);
  config.port = absl::GetFlag(FLAGS_port);
  ASSIGN_OR_RETURN(config.auth_token, AuthTokenFromFlags());
  config.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  config.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  config.service.max_sessions = absl::GetFlag(FLAGS_max_sessions).value;
  config.service.max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client).value;
  config.blocking_pool.max_running_per_key = absl::GetFlag(FLAGS_max_running_calls_per_client).value;
  config.blocking_pool.max_queued_per_key = absl::GetFlag(FLAGS_max_queued_calls_per_client).value;
  if (const std::string file = absl::GetFlag(FLAGS_client_tokens_file); !file.empty()) {
    ASSIGN_OR_RETURN(config.client_tokens, ReadClientTokensFile(file));
  }
  config.service.limits.max_loops = absl::GetFlag(FLAGS_max_loops).value;
  config.session_idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_session_idle_timeout).value);
  config.manage_connections = absl::GetFlag(FLAGS_manage_connections);
  config.client_gone_grace = absl::Seconds(absl::GetFlag(FLAGS_client_gone_grace).value);
  config.transport.max_connections = absl::GetFlag(FLAGS_max_connections).value;
  config.transport.max_streams = absl::GetFlag(FLAGS_max_streams_per_connection).value;
  config.transport.max_connection_idle =
      absl::Seconds(absl::GetFlag(FLAGS_max_connection_idle).value);
  config.transport.keepalive_time = absl::Seconds(absl::GetFlag(FLAGS_keepalive_time).value);
  config.transport.keepalive_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_keepalive_timeout).value);
  config.transport.handshake_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_handshake_timeout).value);
  config.transport.request_timeout = absl::Seconds(absl::GetFlag(FLAGS_request_timeout).value);
  config.max_memory_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_transport_memory_mb).value) << 20;
  const TransportLimits& t = config.transport;
  for (const auto& [name, d] : {std::pair{"max_connection_idle", t.max_connection_idle},
                                {"keepalive_time", t.keepalive_time},
                                {"keepalive_timeout", t.keepalive_timeout},
                                {"handshake_timeout", t.handshake_timeout},
                                {"request_timeout", t.request_timeout}}) {
    if (d < absl::Milliseconds(1)) {  // gRPC takes milliseconds: less would be 0
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be at least 0.001 s"));
    }
  }
  config.drain = absl::Seconds(absl::GetFlag(FLAGS_drain_seconds).value);
  config.upstream_spaces_first = absl::GetFlag(FLAGS_upstream_spaces_first);
  config.workers.cores = absl::GetFlag(FLAGS_eval_cores).cpus;
  if (config.workers.cores.empty()) config.workers.cores = DefaultEvalCores();
  config.workers.isa = absl::GetFlag(FLAGS_isa).isa;
  config.workers.stream_output_min_bytes = absl::GetFlag(FLAGS_stream_stores_min_bytes).value;
  config.workers.deadline_seconds = absl::GetFlag(FLAGS_eval_deadline).value;
  config.workers.max_kernel_seconds = absl::GetFlag(FLAGS_max_kernel_seconds).value;
  if (!absl::GetFlag(FLAGS_prepare_references)) config.workers.max_pending_prepares = 0;
  config.workers.budget_ms = absl::GetFlag(FLAGS_timing_budget_ms).value;
  config.workers.adaptive_timing = absl::GetFlag(FLAGS_timing) == TimingMode::kAdaptive;
  return config;
}

}  // namespace looptool::service

using looptool::service::CpuList;
using looptool::service::IsaChoice;
using looptool::service::NonNegative;
using looptool::service::Positive;
using looptool::service::ServerConfig;
using looptool::service::TimingMode;
using looptool::service::TransportLimits;

ABSL_FLAG(int, port, 0, "port to listen on; 0 picks a free one");
ABSL_FLAG(std::string, bind, "127.0.0.1",
          "address to listen on; any but loopback needs --auth_token_file");
ABSL_FLAG(std::string, auth_token_file, "",
          "file whose first line is a shared token (visible ASCII; surrounding whitespace "
          "dropped): a server requires it of every client (metadata authorization: Bearer), and "
          "clients send it to --server(s)");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain: serve TLS (with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, client_tokens_file, "",
          "file of '<name> <token>' lines: each client's own token, which also names it (its "
          "fair share of sessions, calls and kernel time is then its own, on any connection); "
          "a server with one requires a token (this or --auth_token_file's) of every call");
ABSL_FLAG(Positive<int>, max_sessions, Positive<int>{1024},
          "live sessions at most; when all are taken, a client holding fewer than the largest "
          "holder gets one by ending that holder's least recently used");
ABSL_FLAG(Positive<int>, max_sessions_per_client, Positive<int>{256},
          "live sessions one client (a per-client token's name, else a connection) may hold");
ABSL_FLAG(Positive<int>, max_running_calls_per_client, Positive<int>{8},
          "calls of one client that may wait (timing, forks, a busy session) running at once; "
          "32 threads run them for all clients, in turn");
ABSL_FLAG(Positive<int>, max_queued_calls_per_client, Positive<int>{256},
          "calls of one client waiting for a thread (beyond: RESOURCE_EXHAUSTED); 1024 in all, "
          "beyond which only clients below their share (1024 over the clients waiting) queue");
ABSL_FLAG(bool, manage_connections, true,
          "accept a plaintext server's connections in LoopTool's own listener (a TLS server "
          "always uses gRPC's): caps them (--max_connections), sheds connections instead of "
          "stalling when descriptors run out, holds every client to "
          "--max_streams_per_connection whether it acknowledged the server's HTTP/2 SETTINGS or "
          "not, and ends a client's sessions --client_gone_grace after it disconnects; false: "
          "gRPC's listener, which does none of these");
ABSL_FLAG(Positive<int>, max_connections, Positive<int>{4096},
          "with --manage_connections, open client connections at most (lowered to what the "
          "descriptor limit allows): at the cap a new connection closes the one idle longest");
ABSL_FLAG(NonNegative<double>, client_gone_grace, NonNegative<double>{30},
          "with --manage_connections, seconds after a client's last connection closed (a "
          "per-client token's user, else the connection) before its sessions end, unless it "
          "calls again");
ABSL_FLAG(Positive<int>, max_streams_per_connection,
          Positive<int>{TransportLimits{}.max_streams},
          "HTTP/2 streams one connection may have open at once (advertised in the server's "
          "SETTINGS); a client opening streams it never finishes holds at most this many");
ABSL_FLAG(Positive<double>, max_connection_idle,
          Positive<double>{absl::ToDoubleSeconds(TransportLimits{}.max_connection_idle)},
          "seconds a connection may go without a call before the server closes it");
ABSL_FLAG(Positive<double>, keepalive_time,
          Positive<double>{absl::ToDoubleSeconds(TransportLimits{}.keepalive_time)},
          "seconds a connection may be silent before the server pings it ...");
ABSL_FLAG(Positive<double>, request_timeout,
          Positive<double>{absl::ToDoubleSeconds(TransportLimits{}.request_timeout)},
          "seconds a request's message may take to arrive after its headers; beyond, its "
          "connection is closed (LoopTool's listener, see --manage_connections)");
ABSL_FLAG(Positive<double>, keepalive_timeout,
          Positive<double>{absl::ToDoubleSeconds(TransportLimits{}.keepalive_timeout)},
          "... and closes it if no answer comes within this many seconds");
ABSL_FLAG(Positive<double>, handshake_timeout,
          Positive<double>{absl::ToDoubleSeconds(TransportLimits{}.handshake_timeout)},
          "seconds a new connection has to finish its handshake: with --manage_connections "
          "HTTP/2's preface (checked about every second), with TLS the TLS handshake");
ABSL_FLAG(Positive<int>, max_transport_memory_mb,
          Positive<int>{static_cast<int>(ServerConfig{}.max_memory_bytes >> 20)},
          "MiB gRPC's transport may hold for requests and replies in flight, all connections "
          "together (its resource quota); under pressure it refuses new streams and shrinks "
          "buffers");
ABSL_FLAG(Positive<double>, session_idle_timeout, Positive<double>{3600},
          "seconds after which an unused session is ended");
ABSL_FLAG(NonNegative<double>, drain_seconds, NonNegative<double>{5},
          "on SIGTERM or SIGINT, seconds to let calls in flight finish; then they are cancelled "
          "and running kernels abandoned (the process exits within about a second more)");
ABSL_FLAG(CpuList, eval_cores, CpuList{},
          "comma-separated CPUs, one kernel worker pinned to each (default: the last CPU); the "
          "process's other threads stay off them");
ABSL_FLAG(Positive<double>, eval_deadline, Positive<double>{30},
          "seconds a kernel evaluation may take before it is a hang");
ABSL_FLAG(NonNegative<double>, max_kernel_seconds, NonNegative<double>{10},
          "refuse (RESOURCE_EXHAUSTED) kernels whose estimated evaluation cost is larger; 0: none");
ABSL_FLAG(bool, prepare_references, true,
          "when a session starts, a kernel worker computes its program's reference run (what "
          "every new kernel is verified against) while the client plans, not at the first "
          "measurement; false: at the first measurement");
ABSL_FLAG(Positive<double>, timing_budget_ms, Positive<double>{10},
          "timing budget for each new schedule, milliseconds (with --timing=adaptive: its cap)");
ABSL_FLAG(TimingMode, timing, TimingMode::kAdaptive,
          "adaptive: a new schedule's runs stop once their minimum settles or is clearly slower "
          "than the best, and candidates are timed again with the whole budget; fixed: every new "
          "schedule runs for the whole budget");
ABSL_FLAG(IsaChoice, isa, (IsaChoice{"auto", looptool::DetectIsa()}),
          "code generation target: auto (this CPU's best), avx512, avx2 or sse");
ABSL_FLAG(NonNegative<int64_t>, stream_stores_min_bytes, NonNegative<int64_t>{0},
          "non-temporal stores of a statement's output where it assigns each element once and "
          "the output has at least this many bytes (aligned vectors only; 0: never)");
ABSL_FLAG(Positive<int>, max_loops, Positive<int>{16}, "loops a loop tree may have (both nests)");
ABSL_FLAG(bool, upstream_spaces_first, false,
          "list CompilerGym loop_tool-v0's action spaces (simple, split) first in GetSpaces, for "
          "CompilerGym clients of loop_tool-v0 that default to the first space");
