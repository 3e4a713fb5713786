// ConnectionListener with plain TCP clients (no gRPC; the test holds the ends handed over, as
// gRPC would): each connection is entered in the table and relayed both ways, a hang-up of
// either end closes it, a client with more streams open than allowed (acknowledged SETTINGS or
// not) or not speaking HTTP/2 is cut, the cap closes the longest-idle connection to admit a new
// one, and a descriptor shortage sheds connections without stopping the listener. Synchronised
// on the listener's own counts and on reads with a deadline, never on sleeps.
#include "service/connection_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/service/eventually.h"
#include "tests/service/http2_frames.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

// Whether `done` held within 30 s.
bool Eventually(const std::function<bool()>& done) {
  return testing::Eventually(done, absl::Seconds(30), absl::Milliseconds(1));
}

int Socket() { return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

bool Connect(int fd, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// Whether the server closed `fd` (a read sees the end within 20 s).
bool ClosedByServer(int fd) {
  timeval wait{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  char byte;
  return recv(fd, &byte, 1, 0) == 0;
}

bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// Reads `n` bytes from `fd` (blocking or not) within 20 s; fewer if it ends first.
std::string ReadBytes(int fd, size_t n) {
  std::string got;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (got.size() < n && absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t r = recv(fd, buffer, std::min(sizeof(buffer), n - got.size()), MSG_DONTWAIT);
    if (r == 0) break;
    if (r > 0) got.append(buffer, static_cast<size_t>(r));
  }
  return got;
}

using testing::Frame;
const std::string& kPreface = testing::kHttp2Preface;

std::string Headers(uint32_t stream) { return Frame(0x1, 0x4, stream, "hpack-block"); }

// A listener whose hand-over keeps the descriptors (as gRPC would) until the test ends.
struct Listening {
  explicit Listening(int max_connections = 4096, int max_streams = 16,
                     absl::Duration request_timeout = absl::InfiniteDuration(),
                     absl::Duration handshake_timeout = absl::InfiniteDuration())
      : table(absl::Seconds(30)) {
    ConnectionListener::Options options;
    options.max_connections = max_connections;
    options.max_streams = max_streams;
    options.request_timeout = request_timeout;
    options.handshake_timeout = handshake_timeout;
    auto made = ConnectionListener::Listen("127.0.0.1", 0, options, table);
    EXPECT_TRUE(made.ok()) << made.status();
    listener = *std::move(made);
    listener->Start([this](int fd) {
      absl::MutexLock lock(&mu);
      handed.push_back(fd);
    });
  }
  ~Listening() {
    listener->Stop();
    for (int fd : handed) close(fd);
  }
  int handed_count() {
    absl::MutexLock lock(&mu);
    return static_cast<int>(handed.size());
  }
  int handed_at(int i) {
    absl::MutexLock lock(&mu);
    return handed.at(static_cast<size_t>(i));
  }
  ConnectionTable table;
  std::unique_ptr<ConnectionListener> listener;
  absl::Mutex mu;
  std::vector<int> handed;
};

TEST(ConnectionListener, EntersEachConnectionAndMarksItsHangUp) {
  Listening l;
  ASSERT_GT(l.listener->port(), 0);
  const int a = Socket(), b = Socket();
  ASSERT_TRUE(Connect(a, l.listener->port()));
  ASSERT_TRUE(Connect(b, l.listener->port()));
  ASSERT_TRUE(Eventually([&] { return l.handed_count() == 2; }));
  EXPECT_EQ(l.table.open(), 2);
  close(a);
  EXPECT_TRUE(Eventually([&] { return l.table.open() == 1; }));
  close(b);
  EXPECT_TRUE(Eventually([&] { return l.table.open() == 0; }));
  EXPECT_EQ(l.listener->stats().accepted, 2);
  EXPECT_EQ(l.listener->stats().evicted, 0);
}

TEST(ConnectionListener, RelaysBothWaysAndAClosedEndClosesTheOther) {
  Listening l;
  const int client = Socket();
  ASSERT_TRUE(Connect(client, l.listener->port()));
  ASSERT_TRUE(Eventually([&] { return l.handed_count() == 1; }));
  const int inner = l.handed_at(0);
  const std::string hello = kPreface + Frame(0x4, 0, 0) + Headers(1) +
                            Frame(0x0, 0x1, 1, std::string(200000, 'x'));  // beyond one turn
  ASSERT_TRUE(SendAll(client, hello.substr(0, 100)));
  EXPECT_EQ(ReadBytes(inner, 100), hello.substr(0, 100));
  ASSERT_TRUE(SendAll(client, hello.substr(100)));
  EXPECT_EQ(ReadBytes(inner, hello.size() - 100), hello.substr(100));
  const std::string reply = Frame(0x4, 0, 0) + Frame(0x1, 0x5, 1, std::string(150000, 'y'));
  ASSERT_TRUE(SendAll(inner, reply));
  EXPECT_EQ(ReadBytes(client, reply.size()), reply);
  // gRPC closing its end closes the client's.
  shutdown(inner, SHUT_RDWR);
  EXPECT_TRUE(ClosedByServer(client));
  EXPECT_TRUE(Eventually([&] { return l.table.open() == 0; }));
  EXPECT_EQ(l.listener->stats().cut, 0);
  close(client);
}

// gRPC 1.51 holds a client to the advertised limit only after the client acknowledged the
// server's SETTINGS; the listener holds it either way.
TEST(ConnectionListener, AClientWithMoreStreamsOpenThanAllowedIsCut) {
  for (bool acknowledge : {false, true}) {
    Listening l(/*max_connections=*/4096, /*max_streams=*/4);
    const int client = Socket();
    ASSERT_TRUE(Connect(client, l.listener->port()));
    ASSERT_TRUE(Eventually([&] { return l.handed_count() == 1; }));
    std::string streams = kPreface + Frame(0x4, 0, 0) + (acknowledge ? Frame(0x4, 0x1, 0) : "");
    for (uint32_t id = 1; id <= 7; id += 2) streams += Headers(id);
    ASSERT_TRUE(SendAll(client, streams));
    EXPECT_EQ(ReadBytes(l.handed_at(0), streams.size()), streams);  // four are passed on
    // The server answers stream 1: a fifth stream is then allowed, a sixth is not.
    ASSERT_TRUE(SendAll(l.handed_at(0), Frame(0x1, 0x5, 1, "trailers")));
    ASSERT_EQ(ReadBytes(client, 9 + 8).size(), 17u);
    ASSERT_TRUE(SendAll(client, Headers(9)));
    EXPECT_EQ(ReadBytes(l.handed_at(0), Headers(9).size()), Headers(9));
    EXPECT_EQ(l.listener->stats().cut, 0);
    SendAll(client, Headers(11));
    EXPECT_TRUE(ClosedByServer(client)) << "acknowledged: " << acknowledge;
    EXPECT_TRUE(Eventually([&] { return l.table.open() == 0; }));
    EXPECT_EQ(l.listener->stats().cut, 1);
    EXPECT_EQ(ReadBytes(l.handed_at(0), 1), "");  // gRPC's end sees the close
    close(client);
  }
}

TEST(ConnectionListener, AConnectionWithARequestUnfinishedPastTheTimeoutIsClosed) {
  Listening l(4096, 16, /*request_timeout=*/absl::Milliseconds(200));
  const int finished = Socket(), unfinished = Socket();
  ASSERT_TRUE(Connect(finished, l.listener->port()));
  ASSERT_TRUE(Eventually([&] { return l.handed_count() == 1; }));
  ASSERT_TRUE(Connect(unfinished, l.listener->port()));
  ASSERT_TRUE(Eventually([&] { return l.handed_count() == 2; }));
  const std::string start = kPreface + Frame(0x4, 0, 0);
  ASSERT_TRUE(SendAll(finished, start + Headers(1) + Frame(0x0, 0x1, 1, "message")));
  ASSERT_TRUE(SendAll(unfinished, start + Headers(1) + Frame(0x0, 0x0, 1, "half a mess")));
  EXPECT_TRUE(ClosedByServer(unfinished));
  EXPECT_TRUE(Eventually([&] { return l.listener->stats().timed_out == 1; }));
  // The finished request (its answer still owed) keeps its connection.
  EXPECT_TRUE(Eventually([&] { return l.table.open() == 1; }));
  const std::string expected = start + Headers(1) + Frame(0x0, 0x1, 1, "message");
  EXPECT_EQ(ReadBytes(l.handed_at(0), expected.size()), expected);
  close(finished);
  close(unfinished);
}

TEST(ConnectionListener, AClientThatDoesNotFinishItsPrefaceInTimeIsClosed) {
  // (1 s: `greeted` finishes its preface after the three are handed on, which a loaded machine
  // may delay by a good part of a second.)
  Listening l(4096, 16, absl::InfiniteDuration(), /*handshake_timeout=*/absl::Seconds(1));
  const int silent = Socket(), half = Socket(), greeted = Socket();
  for (int fd : {silent, half, greeted}) ASSERT_TRUE(Connect(fd, l.listener->port()));
  ASSERT_TRUE(Eventually([&] { return l.handed_count() == 3; }));
  ASSERT_TRUE(SendAll(half, kPreface.substr(0, 10)));
  ASSERT_TRUE(SendAll(greeted, kPreface));  // done with the handshake; no stream needed
  EXPECT_TRUE(ClosedByServer(silent));
  EXPECT_TRUE(ClosedByServer(half));
  EXPECT_TRUE(Eventually([&] { return l.listener->stats().handshake_timed_out == 2; }));
  EXPECT_TRUE(Eventually([&] { return l.table.open() == 1; }));
  EXPECT_EQ(l.listener->stats().timed_out, 0);
  // The greeted connection is still relayed; the others' ends saw what came before the close.
  ASSERT_TRUE(SendAll(greeted, Frame(0x4, 0, 0)));
  const std::string expected = kPreface + Frame(0x4, 0, 0);
  std::vector<std::string> relayed;
  for (int i = 0; i < 3; ++i) relayed.push_back(ReadBytes(l.handed_at(i), expected.size()));
  std::sort(relayed.begin(), relayed.end());
  EXPECT_EQ(relayed, (std::vector<std::string>{"", kPreface.substr(0, 10), expected}));
  EXPECT_EQ(l.listener->stats().handshake_timed_out, 2);
  for (int fd : {silent, half, greeted}) close(fd);
}

TEST(ConnectionListener, AClientThatDoesNotSpeakHttp2IsCut) {
  Listening l;
  const int client = Socket();
  ASSERT_TRUE(Connect(client, l.listener->port()));
  ASSERT_TRUE(SendAll(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(ClosedByServer(client));
  EXPECT_EQ(l.listener->stats().cut, 1);
  close(client);
}

TEST(ConnectionListener, AtTheCapTheLongestIdleConnectionIsClosed) {
  Listening l(/*max_connections=*/2);
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Socket());
    ASSERT_TRUE(Connect(clients.back(), l.listener->port()));
    ASSERT_TRUE(Eventually([&] { return l.handed_count() == i + 1; }));
  }
  EXPECT_TRUE(ClosedByServer(clients[0]));  // the oldest, with no call since
  EXPECT_EQ(l.table.open(), 2);
  EXPECT_EQ(l.listener->stats().evicted, 1);
  for (int fd : clients) close(fd);
}

TEST(ConnectionListener, RunningOutOfDescriptorsShedsConnectionsAndListeningGoesOn) {
  Listening l;
  std::vector<int> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(Socket());
  // The limit leaves exactly three descriptor numbers free: room for one connection (and its
  // relay's socket pair) at a time.
  int free_seen = 0, limit = 0;
  for (int fd = 0; free_seen < 4; ++fd) {
    if (fcntl(fd, F_GETFD) == -1) ++free_seen;
    limit = fd;
  }
  rlimit inherited;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &inherited), 0);
  rlimit lowered = inherited;
  lowered.rlim_cur = limit;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  for (int fd : clients) ASSERT_TRUE(Connect(fd, l.listener->port()));
  const bool settled = Eventually([&] {
    const ConnectionListener::Stats s = l.listener->stats();
    return s.accepted + s.shed == 8;
  });
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &inherited), 0);
  ASSERT_TRUE(settled) << l.listener->stats().accepted << " accepted, " << l.listener->stats().shed
                       << " shed, " << l.listener->stats().evicted << " evicted; limit " << lowered.rlim_cur;
  EXPECT_GT(l.listener->stats().shed, 0);
  // Descriptors are back: a new client is taken.
  const int64_t before = l.listener->stats().accepted;
  const int late = Socket();
  ASSERT_TRUE(Connect(late, l.listener->port()));
  EXPECT_TRUE(Eventually([&] { return l.listener->stats().accepted == before + 1; }));
  close(late);
  for (int fd : clients) close(fd);
}

TEST(ConnectionListener, ABoundPortIsRefusedWithTheAddress) {
  ConnectionTable table(absl::Seconds(1));
  auto first = ConnectionListener::Listen("127.0.0.1", 0, {}, table);
  ASSERT_TRUE(first.ok());
  auto second = ConnectionListener::Listen("127.0.0.1", (*first)->port(), {}, table);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos);
}

}  // namespace
}  // namespace looptool::service
