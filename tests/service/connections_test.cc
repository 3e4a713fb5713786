// A real looptool-server's connections with --manage_connections (ConnectionListener,
// ConnectionTable): a client's sessions end once its connection has closed and its grace
// passed, while other clients' go on; a per-client token's user that reconnects within its grace keeps its sessions; at
// --max_connections the longest-idle connection is closed and its client reconnects when it
// next calls; a client that opens more HTTP/2 streams at once than the server advertises is cut
// whether or not it acknowledged the server's SETTINGS, while a gRPC client with more calls in
// flight than that is never cut, and a request whose message never arrives closes its
// connection after --request_timeout. Synchronised on what the server answers (polled), never on
// sleeps.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/service/eventually.h"
#include "tests/service/http2_frames.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool {
namespace {

using testing::ServerProcess;
namespace cg = compiler_gym;
using Stub = cg::CompilerGymService::Stub;

constexpr char kMm[] = "benchmark://mm64_256_16_range-v0/mm64_64_64";

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

int64_t Start(Stub& stub, const std::string& token = "") {
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(kMm);
  cg::StartSessionReply reply;
  const grpc::Status s = stub.StartSession(Ctx(token).get(), r, &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return reply.session_id();
}

grpc::StatusCode Step(Stub& stub, int64_t session, const std::string& token = "") {
  cg::StepRequest r;
  r.set_session_id(session);
  cg::StepReply reply;
  return stub.Step(Ctx(token).get(), r, &reply).error_code();
}

// Sessions the server holds (EndSession of no session answers it and ends nothing; a Step
// would count as using the session it probes).
int Remaining(Stub& stub, const std::string& token = "") {
  cg::EndSessionRequest r;
  r.set_session_id(-1);
  cg::EndSessionReply reply;
  const grpc::Status s = stub.EndSession(Ctx(token).get(), r, &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return reply.remaining_sessions();
}

// Whether `done` held within two minutes.
bool Eventually(const std::function<bool()>& done) {
  return testing::Eventually(done, absl::Minutes(2), absl::Milliseconds(20));
}

TEST(Connections, AClientsSessionsEndOnceItHasGoneForItsGrace) {
  ServerProcess server({"--manage_connections", "--client_gone_grace=0.2"});
  ASSERT_TRUE(server.ok());
  auto leaving = server.NewStub(), staying = server.NewStub();
  const int64_t gone = Start(*leaving), also_gone = Start(*leaving);
  const int64_t kept = Start(*staying);
  EXPECT_EQ(Step(*staying, gone), grpc::StatusCode::OK);  // anyone may use it while it lives
  EXPECT_EQ(Remaining(*staying), 3);
  leaving.reset();  // its channel, and so its connection, closes
  EXPECT_TRUE(Eventually([&] { return Remaining(*staying) == 1; }));
  EXPECT_EQ(Step(*staying, gone), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Step(*staying, also_gone), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Step(*staying, kept), grpc::StatusCode::OK);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Connections, AUserBackWithinItsGraceKeepsItsSessions) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string tokens = std::string(tmp ? tmp : "/tmp") + "/client_tokens";
  std::ofstream(tokens) << "alice alice-token\nbob bob-token\ncarol carol-token\n";
  ServerProcess server(
      {"--manage_connections", "--client_tokens_file=" + tokens, "--client_gone_grace=5"});
  ASSERT_TRUE(server.ok());
  auto alice = server.NewStub(), bob = server.NewStub(), observer = server.NewStub();
  const int64_t hers = Start(*alice, "alice-token"), his = Start(*bob, "bob-token");
  alice.reset();
  bob.reset();
  alice = server.NewStub();  // alice reconnects (well within 5 s) and calls; bob does not
  cg::GetVersionReply version;
  ASSERT_TRUE(alice->GetVersion(Ctx("alice-token").get(), {}, &version).ok());
  EXPECT_TRUE(Eventually([&] { return Remaining(*observer, "carol-token") == 1; }));
  EXPECT_EQ(Step(*observer, his, "carol-token"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Step(*alice, hers, "alice-token"), grpc::StatusCode::OK);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Connections, AtTheCapTheIdlestConnectionIsClosedAndItsClientReconnects) {
  ServerProcess server({"--manage_connections", "--max_connections=3"});
  ASSERT_TRUE(server.ok());
  cg::GetVersionReply version;
  ASSERT_TRUE(server.stub().GetVersion(Ctx().get(), {}, &version).ok());  // connection 1
  grpc::ChannelArguments own;  // a connection per channel
  own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Stub>> stubs;
  for (int i = 0; i < 4; ++i) {  // connections 2 to 5: the 4th and 5th close 1 and 2
    channels.push_back(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), own));
    stubs.push_back(cg::CompilerGymService::NewStub(channels.back()));
    ASSERT_TRUE(stubs.back()->GetVersion(Ctx().get(), {}, &version).ok()) << i;
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(60);
  if (channels[0]->GetState(false) == GRPC_CHANNEL_READY) {
    EXPECT_TRUE(channels[0]->WaitForStateChange(GRPC_CHANNEL_READY, deadline));
  }
  EXPECT_NE(channels[0]->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_EQ(channels[2]->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_EQ(channels[3]->GetState(false), GRPC_CHANNEL_READY);
  // Its client reconnects when it next calls (closing channels[1]'s connection, the idlest).
  EXPECT_TRUE(stubs[0]->GetVersion(Ctx().get(), {}, &version).ok());
  EXPECT_TRUE(channels[1]->WaitForStateChange(GRPC_CHANNEL_READY, deadline));
  EXPECT_EQ(server.Terminate(), 0);
}

using testing::Frame;

// Opens `streams` streams of headers and no body on a new connection to `port`, acknowledging
// the server's SETTINGS or not (reading nothing the server sends); whether the server closed
// the connection (a read sees its end or a reset within 20 s).
bool ClosedAfterOpening(int port, int streams, bool acknowledge) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return false;
  }
  std::string bytes = testing::kHttp2Preface + Frame(0x4, 0, 0, "");
  if (acknowledge) bytes += Frame(0x4, 0x1, 0, "");  // before the server's SETTINGS arrive
  for (int i = 0; i < streams; ++i) {
    bytes += Frame(0x1, 0x4, static_cast<uint32_t>(2 * i + 1),
                   testing::StepRequestHeaders("127.0.0.1"));
  }
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  timeval wait{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  bool closed = false;
  char buffer[4096];
  while (true) {
    const ssize_t r = recv(fd, buffer, sizeof(buffer), 0);
    if (r > 0) continue;
    closed = r == 0 || errno == ECONNRESET;
    break;
  }
  close(fd);
  return closed;
}

TEST(Connections, AClientOverTheStreamLimitIsCutAcknowledgedOrNot) {
  ServerProcess server({"--manage_connections", "--max_streams_per_connection=8"});
  ASSERT_TRUE(server.ok());
  EXPECT_TRUE(ClosedAfterOpening(server.port(), 500, /*acknowledge=*/false));
  EXPECT_TRUE(ClosedAfterOpening(server.port(), 500, /*acknowledge=*/true));
  // Within the limit, a connection is kept (its streams wait for their messages).
  EXPECT_FALSE(ClosedAfterOpening(server.port(), 8, /*acknowledge=*/false));
  cg::GetVersionReply version;
  EXPECT_TRUE(server.stub().GetVersion(Ctx().get(), {}, &version).ok());
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Connections, ARequestThatNeverFinishesClosesItsConnection) {
  ServerProcess server({"--request_timeout=1"});  // LoopTool's listener is the default
  ASSERT_TRUE(server.ok());
  EXPECT_TRUE(ClosedAfterOpening(server.port(), 1, /*acknowledge=*/true));
  cg::GetVersionReply version;
  EXPECT_TRUE(server.stub().GetVersion(Ctx().get(), {}, &version).ok());
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Connections, AConnectionThatNeverGreetsIsClosed) {
  ServerProcess server({"--handshake_timeout=1"});
  ASSERT_TRUE(server.ok());
  const int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval wait{20, 0};
  setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  // The server's SETTINGS arrive, then the end: closed by the server, not by the 20 s deadline.
  char buffer[4096];
  ssize_t got;
  while ((got = recv(silent, buffer, sizeof(buffer), 0)) > 0) {
  }
  EXPECT_EQ(got, 0);
  close(silent);
  cg::GetVersionReply version;
  EXPECT_TRUE(server.stub().GetVersion(Ctx().get(), {}, &version).ok());
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(Connections, AGrpcClientWithMoreCallsThanStreamsIsNeverCut) {
  ServerProcess server({"--manage_connections", "--max_streams_per_connection=2"});
  ASSERT_TRUE(server.ok());
  std::atomic<int> failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t) {  // one channel, 16 calls at a time against 2 streams
    callers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        cg::GetVersionReply version;
        if (!server.stub().GetVersion(Ctx().get(), {}, &version).ok()) ++failed;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(server.Terminate(), 0);
}

}  // namespace
}  // namespace looptool
