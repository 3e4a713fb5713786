// The LoopTool server's command-line flags, defined once for every binary that runs a server:
// looptool-server, the looptool CLI (its embedded server), the benchmarks. Each flag's type
// parses and checks its value (AbslParseFlag), so a bad value is refused by Abseil's flag parser
// with a message naming the flag; ServerConfigFromFlags() then assembles the ServerConfig.
//
//   --port --bind --auth_token_file --tls_cert_file --tls_key_file --max_sessions
//   --session_idle_timeout --manage_connections --max_connections --client_gone_grace
//   --eval_cores --eval_deadline --max_kernel_seconds --prepare_references --timing_budget_ms
//   --timing --isa --max_loops --upstream_spaces_first
#ifndef LOOPTOOL_SERVICE_SERVER_FLAGS_H_
#define LOOPTOOL_SERVICE_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/codegen/isa.h"
#include "service/server.h"

namespace looptool::service {

// A number that must be > 0 (Positive) or >= 0 (NonNegative).
template <typename T>
struct Positive {
  T value;
};
template <typename T>
struct NonNegative {
  T value;
};
bool AbslParseFlag(absl::string_view text, Positive<double>* out, std::string* error);
bool AbslParseFlag(absl::string_view text, Positive<int>* out, std::string* error);
bool AbslParseFlag(absl::string_view text, NonNegative<double>* out, std::string* error);
bool AbslParseFlag(absl::string_view text, NonNegative<int64_t>* out, std::string* error);
std::string AbslUnparseFlag(const Positive<double>& v);
std::string AbslUnparseFlag(const Positive<int>& v);
std::string AbslUnparseFlag(const NonNegative<double>& v);
std::string AbslUnparseFlag(const NonNegative<int64_t>& v);

// Comma-separated CPU numbers ("2,3"); empty: DefaultEvalCores().
struct CpuList {
  std::vector<int> cpus;
};
bool AbslParseFlag(absl::string_view text, CpuList* out, std::string* error);
std::string AbslUnparseFlag(const CpuList& v);

// How new schedules are timed: "adaptive" or "fixed" (WorkerPool::Options::adaptive_timing).
enum class TimingMode { kAdaptive, kFixed };
bool AbslParseFlag(absl::string_view text, TimingMode* out, std::string* error);
std::string AbslUnparseFlag(TimingMode v);

// The code generator's target: "auto" (this CPU's best), "avx512", "avx2" or "sse"; one this
// CPU cannot run is refused.
struct IsaChoice {
  std::string name = "auto";
  Isa isa = Isa::kSse;  // resolved from `name` when parsed
};
bool AbslParseFlag(absl::string_view text, IsaChoice* out, std::string* error);
std::string AbslUnparseFlag(const IsaChoice& v);

// The ServerConfig the flags ask for: the token file read (util/auth_token.h), --eval_cores
// empty meaning DefaultEvalCores(). INVALID_ARGUMENT for an unreadable or malformed token file.
absl::StatusOr<ServerConfig> ServerConfigFromFlags();

// The shared token of --auth_token_file, "" when none is given: what a server requires, and
// what the CLI and benchmarks send to a --server. INVALID_ARGUMENT as above.
absl::StatusOr<std::string> AuthTokenFromFlags();

}  // namespace looptool::service

ABSL_DECLARE_FLAG(int, port);
ABSL_DECLARE_FLAG(std::string, bind);
ABSL_DECLARE_FLAG(std::string, auth_token_file);
ABSL_DECLARE_FLAG(std::string, tls_cert_file);
ABSL_DECLARE_FLAG(std::string, tls_key_file);
ABSL_DECLARE_FLAG(std::string, client_tokens_file);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_sessions);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_sessions_per_client);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_running_calls_per_client);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_queued_calls_per_client);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, session_idle_timeout);
ABSL_DECLARE_FLAG(bool, manage_connections);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_connections);
ABSL_DECLARE_FLAG(looptool::service::NonNegative<double>, client_gone_grace);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_streams_per_connection);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, max_connection_idle);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, keepalive_time);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, keepalive_timeout);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, request_timeout);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, handshake_timeout);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_transport_memory_mb);
ABSL_DECLARE_FLAG(looptool::service::NonNegative<double>, drain_seconds);
ABSL_DECLARE_FLAG(looptool::service::CpuList, eval_cores);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, eval_deadline);
ABSL_DECLARE_FLAG(looptool::service::NonNegative<double>, max_kernel_seconds);
ABSL_DECLARE_FLAG(bool, prepare_references);
ABSL_DECLARE_FLAG(looptool::service::Positive<double>, timing_budget_ms);
ABSL_DECLARE_FLAG(looptool::service::TimingMode, timing);
ABSL_DECLARE_FLAG(looptool::service::IsaChoice, isa);
ABSL_DECLARE_FLAG(looptool::service::NonNegative<int64_t>, stream_stores_min_bytes);
ABSL_DECLARE_FLAG(looptool::service::Positive<int>, max_loops);
ABSL_DECLARE_FLAG(bool, upstream_spaces_first);

#endif  // LOOPTOOL_SERVICE_SERVER_FLAGS_H_
