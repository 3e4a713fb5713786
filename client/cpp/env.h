// Env: one episode on a server, CompilerGym style: a session started on a benchmark, stepped by
// action index or name, observed by name, forked (a cheap server-side deep copy) and closed.
// Move-only; closing (or destroying) ends the session. Not thread-safe; use one Env per thread.
#ifndef LOOPTOOL_CLIENT_CPP_ENV_H_
#define LOOPTOOL_CLIENT_CPP_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cpp/connection.h"
#include "client/cpp/value.h"

namespace looptool::client {

// What a step returns: whether the actions changed anything, and the observations asked for,
// looked up by name.
struct StepResult {
  bool action_had_no_effect = true;  // all actions changed nothing
  std::vector<std::string> names;    // the observations asked for, in that order
  std::vector<Value> observations;   // observations[i] is names[i]

  // The observation `name`, or nullptr when the step did not ask for it. Env::Step returns a
  // value for every name it was asked for, so those are never null.
  const Value* Find(absl::string_view name) const;
  // The same as a copy; NOT_FOUND, naming those asked for, when the step did not ask for it.
  absl::StatusOr<Value> Get(absl::string_view name) const;
};

// A kernel timed again by the server (Env::Remeasure).
struct Retiming {
  double gflops = 0;
  // The FMA peak the server measured on the same core right after the kernel, at the clock the
  // kernel ran at; 0 from a server that does not measure one.
  double peak_gflops = 0;
};

class Env {
 public:
  // Starts a session on `benchmark` (a URI). NOT_FOUND when the server has no such benchmark.
  static absl::StatusOr<Env> Start(std::shared_ptr<Connection> connection,
                                   const std::string& benchmark,
                                   const std::string& action_space = "loop_tool");
  // Adds `program` (loop-nest language) under `uri`, then starts a session on it.
  static absl::StatusOr<Env> StartProgram(std::shared_ptr<Connection> connection,
                                          const std::string& uri, const std::string& program,
                                          const std::string& action_space = "loop_tool");

  Env(Env&& other) noexcept;
  Env& operator=(Env&& other) noexcept;
  ~Env();

  // Ends this episode's session and starts a new one on `benchmark` (the same one when empty),
  // with the same action space. On error the Env is closed.
  absl::Status Reset(const std::string& benchmark = "");

  // Applies `actions` (indices of the action space) in order, then returns `observations`.
  absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                  const std::vector<std::string>& observations = {});
  // The same with action names ("split_4"); INVALID_ARGUMENT for a name the space lacks.
  absl::StatusOr<StepResult> StepNamed(const std::vector<std::string>& actions,
                                       const std::vector<std::string>& observations = {});
  absl::StatusOr<Value> Observe(const std::string& observation);
  // The current state's kernel timed again by the server with its full fixed budget, no cache
  // and no early stop (session parameter looptool.remeasure), and the peak measured beside it.
  // Searches re-time their winners with it. Bounded by the connection's call timeout, not the
  // deadline.
  absl::StatusOr<Retiming> Remeasure();
  // A new session in the current state; later steps of either never affect the other.
  absl::StatusOr<Env> Fork() const;
  // Ends the session; later calls fail. Idempotent.
  absl::Status Close();
  // Close of each of `envs` that is open, their calls sent together, 8 open at once at most,
  // and awaited together (a few calls' wait rather than one each; one alone is Close's own
  // call); each is closed whatever its call's outcome. An error of one of the calls, or OK.
  static absl::Status CloseAll(const std::vector<Env*>& envs);

  // Calls (but Close) end by `deadline` at the latest (DEADLINE_EXCEEDED); forks inherit it.
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }

  int64_t session_id() const { return session_id_; }
  const std::string& benchmark() const { return benchmark_; }
  const std::vector<std::string>& action_names() const { return *action_names_; }
  const std::string& action_space() const { return action_space_; }
  const std::shared_ptr<Connection>& connection() const { return connection_; }
  // Index of an action name, or -1.
  int ActionIndex(const std::string& name) const;

 private:
  Env(std::shared_ptr<Connection> connection, int64_t session, std::string benchmark,
      std::string action_space, std::shared_ptr<const std::vector<std::string>> action_names);

  // How long Close's call waits: briefly where the connection's last call was not answered.
  static absl::Duration CloseTimeout(const Connection& connection);

  std::shared_ptr<Connection> connection_;
  int64_t session_id_ = -1;
  bool open_ = false;
  std::string benchmark_;
  std::string action_space_;
  std::shared_ptr<const std::vector<std::string>> action_names_;
  absl::Time deadline_ = absl::InfiniteFuture();
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_ENV_H_
