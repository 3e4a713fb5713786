#include "tests/service/server_process.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

extern char** environ;

namespace looptool::testing {

ServerProcess::ServerProcess(std::vector<std::string> flags, std::string binary) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string templ = std::string(tmp ? tmp : "/tmp") + "/looptool-server-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return;
  working_dir_ = templ;
  std::vector<std::string> args = {binary, "--working_dir=" + working_dir_};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    pid_ = -1;
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(working_dir_ + "/port.txt");
    if (in >> port_ && port_ > 0) break;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // it exited: a refused start
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (port_ <= 0) return;
  stub_ = NewStub();
}

std::unique_ptr<compiler_gym::CompilerGymService::Stub> ServerProcess::NewStub() const {
  // A connection of its own (gRPC would share one between channels to the same address): the
  // server tells clients apart by connection.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // As LoopTool's clients do: a machine_code observation may be larger than gRPC's 4 MB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  return compiler_gym::CompilerGymService::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials(), args));
}

int ServerProcess::Terminate() {
  if (pid_ <= 0) return -1;
  stub_.reset();  // close our connection first, so the server's drain is not kept waiting
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

ServerProcess::~ServerProcess() {
  stub_.reset();
  Terminate();
}

int ObservationIndex(compiler_gym::CompilerGymService::Stub& stub, const std::string& name) {
  grpc::ClientContext ctx;
  compiler_gym::GetSpacesRequest request;
  compiler_gym::GetSpacesReply reply;
  if (!stub.GetSpaces(&ctx, request, &reply).ok()) return -1;
  for (int i = 0; i < reply.observation_space_list_size(); ++i) {
    if (reply.observation_space_list(i).name() == name) return i;
  }
  return -1;
}

}  // namespace looptool::testing
