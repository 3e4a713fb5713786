// ConnectionListener with plain TCP clients (no gRPC): each connection is entered in the table
// and handed over, a peer's hang-up marks it closed, the cap closes the longest-idle connection
// to admit a new one, and a descriptor shortage sheds connections without stopping the
// listener. Synchronised on the listener's own counts (polled), never on sleeps.
#include "service/connection_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/service/eventually.h"
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

// A listener whose hand-over keeps the descriptors (as gRPC would) until the test ends.
struct Listening {
  explicit Listening(int max_connections = 4096) : table(absl::Seconds(30)) {
    ConnectionListener::Options options;
    options.max_connections = max_connections;
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
  // watch) at a time.
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
