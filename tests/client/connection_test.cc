// The channel's retry policy, against an in-process fake server whose every method answers
// UNAVAILABLE a set number of times before it succeeds: every method but Step is tried 4 times in
// all, Step exactly once (a step applies actions and must not run twice).
#include "client/cpp/connection.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "client/cpp/env.h"
#include "gtest/gtest.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace looptool::client {
namespace {

namespace cg = compiler_gym;

// Answers the first `failures` calls of each method UNAVAILABLE, then succeeds; counts calls.
class FlakyService final : public cg::CompilerGymService::Service {
 public:
  explicit FlakyService(int failures) : failures_(failures) {}

  int calls(const std::string& method) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[method];
  }

  grpc::Status GetVersion(grpc::ServerContext*, const cg::GetVersionRequest*,
                          cg::GetVersionReply*) override {
    return Answer("GetVersion");
  }
  grpc::Status GetSpaces(grpc::ServerContext*, const cg::GetSpacesRequest*,
                         cg::GetSpacesReply* reply) override {
    cg::ActionSpace* space = reply->add_action_space_list();
    space->set_name("loop_tool");
    space->mutable_space()->mutable_named_discrete()->add_name("up");
    reply->add_observation_space_list()->set_name("loop_tree");
    return Answer("GetSpaces");
  }
  grpc::Status StartSession(grpc::ServerContext*, const cg::StartSessionRequest*,
                            cg::StartSessionReply* reply) override {
    reply->set_session_id(1);
    return Answer("StartSession");
  }
  grpc::Status ForkSession(grpc::ServerContext*, const cg::ForkSessionRequest*,
                           cg::ForkSessionReply* reply) override {
    reply->set_session_id(2);
    return Answer("ForkSession");
  }
  grpc::Status EndSession(grpc::ServerContext*, const cg::EndSessionRequest*,
                          cg::EndSessionReply*) override {
    return Answer("EndSession");
  }
  grpc::Status Step(grpc::ServerContext*, const cg::StepRequest*, cg::StepReply*) override {
    return Answer("Step");
  }
  grpc::Status AddBenchmark(grpc::ServerContext*, const cg::AddBenchmarkRequest*,
                            cg::AddBenchmarkReply*) override {
    return Answer("AddBenchmark");
  }
  grpc::Status SendSessionParameter(grpc::ServerContext*, const cg::SendSessionParameterRequest*,
                                    cg::SendSessionParameterReply*) override {
    return Answer("SendSessionParameter");
  }

 private:
  grpc::Status Answer(const std::string& method) {
    std::lock_guard<std::mutex> lock(mu_);
    if (++calls_[method] <= failures_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "flaky");
    }
    return grpc::Status::OK;
  }

  const int failures_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
};

class FakeServer {
 public:
  explicit FakeServer(int failures) : service_(failures) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FlakyService& service() { return service_; }

 private:
  FlakyService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(RetryPolicy, EveryMethodButStepIsTriedFourTimes) {
  FakeServer server(/*failures=*/3);
  FlakyService& service = server.service();
  auto c = Connection::Connect(server.address(), absl::Seconds(10));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(service.calls("GetSpaces"), 4);
  // Connect also asked for the version (tried four times); this server names no host CPU.
  EXPECT_EQ(service.calls("GetVersion"), 4);
  EXPECT_EQ((*c)->host_cpu(), "unknown CPU");

  cg::GetVersionReply version;
  EXPECT_TRUE((*c)->Invoke([&](grpc::ClientContext* ctx) {
                    return (*c)->stub().GetVersion(ctx, {}, &version);
                  }).ok());
  EXPECT_EQ(service.calls("GetVersion"), 5);  // past its failures: once
  cg::SendSessionParameterReply parameter;
  EXPECT_TRUE((*c)->Invoke([&](grpc::ClientContext* ctx) {
                    return (*c)->stub().SendSessionParameter(ctx, {}, &parameter);
                  }).ok());
  EXPECT_EQ(service.calls("SendSessionParameter"), 4);

  auto env = Env::StartProgram(*c, "benchmark://user-v0/x", "y[m] += x[m]; m=8");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(service.calls("AddBenchmark"), 4);
  EXPECT_EQ(service.calls("StartSession"), 4);
  auto fork = env->Fork();
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(service.calls("ForkSession"), 4);
  EXPECT_TRUE(fork->Close().ok());
  EXPECT_EQ(service.calls("EndSession"), 4);

  // Step, with actions or without, is sent once and its UNAVAILABLE returned.
  EXPECT_EQ(env->Step({0}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service.calls("Step"), 1);
  EXPECT_EQ(env->Step({}, {"loop_tree"}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service.calls("Step"), 2);
}

TEST(RetryPolicy, GivesUpAfterFourAttempts) {
  FakeServer server(/*failures=*/4);
  auto c = Connection::Connect(server.address(), absl::Seconds(10));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.service().calls("GetSpaces"), 4);
}

}  // namespace
}  // namespace looptool::client
