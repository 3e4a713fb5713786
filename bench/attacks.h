// Adversarial but legal clients of a looptool server, for adversarial_soak_bench: each attack
// runs on its own threads and connections from Start() until Stop(), and tallies what it did
// and what the server answered. They reproduce the attacks of the second hardening round
// (README, "Hardening"): filling the server with sessions, HTTP/2 streams that never finish,
// idle connections by the thousand, slow kernels and a busy session, identity churn.
#ifndef LOOPTOOL_BENCH_ATTACKS_H_
#define LOOPTOOL_BENCH_ATTACKS_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/client_context.h"
#include "proto/compiler_gym_service.grpc.pb.h"

namespace looptool::bench {

// A stub on a connection of its own (a local subchannel pool): to the server, its own client.
std::unique_ptr<compiler_gym::CompilerGymService::Stub> NewClientStub(const std::string& address);
// A context whose deadline is `seconds` away, sending `client_id` as looptool-client-id when
// it is not empty.
std::unique_ptr<grpc::ClientContext> CallContext(double seconds,
                                                 const std::string& client_id = "");
// "OK", "RESOURCE_EXHAUSTED", ...
std::string CodeName(grpc::StatusCode code);

class Attack {
 public:
  virtual ~Attack() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Starts the attack's threads; returns at once.
  virtual void Start() = 0;
  // Stops the threads, closes the connections and ends nothing else (sessions it made stay for
  // the server to reap). Returns when all are gone.
  virtual void Stop() = 0;
  // What it did, in words ("3,120 forks: 1,020 OK, 2,100 RESOURCE_EXHAUSTED; ...").
  virtual std::string Tally() const = 0;
};

// Sizes of the server's action spaces (by index), as GetSpaces lists them.
struct ServerSpaces {
  std::vector<int64_t> action_space_sizes;
  int loops_tensor = -1;  // observation indices
  int flops = -1;
};

// `connections` clients that each fork until refused, keep every session alive with empty
// Steps, and fork again; they never end a session.
std::unique_ptr<Attack> SessionHog(const std::string& address, int connections);
// `connections` raw TCP connections that each open `streams` HTTP/2 streams with headers and
// no body (no token, no END_STREAM), and reopen when the server closes them. Each acknowledges
// the server's SETTINGS (as HTTP/2 requires) when `acknowledge_settings`, else never does.
std::unique_ptr<Attack> StreamFlood(const std::string& address, int connections, int streams,
                                    bool acknowledge_settings);
// `silent` TCP connections that send nothing and `preface` that send only HTTP/2's preface,
// reopened when the server closes them.
std::unique_ptr<Attack> IdleConnections(const std::string& address, int silent, int preface);
// One client (one connection): `sessions` threads each asking a legal slow kernel to be timed
// (a new schedule of a convolution each time), and `busy_steps` threads stepping one session
// that is itself timing kernels.
std::unique_ptr<Attack> SlowKernels(const std::string& address, const ServerSpaces& spaces,
                                    int sessions, int busy_steps);
// Tiny AddBenchmark calls, each under a new looptool-client-id, from `threads` threads.
std::unique_ptr<Attack> IdentityChurn(const std::string& address, int threads);
// All of `attacks` at once.
std::unique_ptr<Attack> Together(std::vector<std::unique_ptr<Attack>> attacks);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_ATTACKS_H_
