// ServerProcess: a real looptool-server started as a child process on loopback for a test, with
// a stub connected to it. The destructor sends SIGTERM and checks that the server exits 0.
#ifndef LOOPTOOL_TESTS_SERVICE_SERVER_PROCESS_H_
#define LOOPTOOL_TESTS_SERVICE_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "proto/compiler_gym_service.grpc.pb.h"

namespace looptool::testing {

class ServerProcess {
 public:
  // Starts `binary` (a runfile: the server, or the test server with fault injection) with
  // `flags` plus --working_dir and waits for its port.txt (or its exit: a refused start). Check
  // ok() before use.
  explicit ServerProcess(std::vector<std::string> flags = {},
                         std::string binary = kServerBinary);
  static constexpr char kServerBinary[] = "service/looptool-server";
  static constexpr char kTestServerBinary[] = "tests/faults/looptool-test-server";
  ~ServerProcess();

  bool ok() const { return stub_ != nullptr; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& working_dir() const { return working_dir_; }
  compiler_gym::CompilerGymService::Stub& stub() { return *stub_; }
  // A stub on a connection of its own: to the server, another client.
  std::unique_ptr<compiler_gym::CompilerGymService::Stub> NewStub() const;

  // Closes the stub, sends SIGTERM and returns the exit status (as from waitpid) once the server is gone.
  int Terminate();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string working_dir_;
  std::unique_ptr<compiler_gym::CompilerGymService::Stub> stub_;
};

// The index of an observation or action space by name in GetSpaces' lists.
int ObservationIndex(compiler_gym::CompilerGymService::Stub& stub, const std::string& name);

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_SERVICE_SERVER_PROCESS_H_
