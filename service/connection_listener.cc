#include "service/connection_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace looptool::service {
namespace {

constexpr uint64_t kStopTag = 0;  // serials start at 1
constexpr uint64_t kListenTag = ~uint64_t{0};

// As gRPC writes peers: "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555".
std::string AddressOf(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return absl::StrCat("ipv4:", text, ":", ntohs(v4->sin_port));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
  inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
  return absl::StrCat("ipv6:[", text, "]:", ntohs(v6->sin6_port));
}

absl::Status Unavailable(const std::string& what, const std::string& host, int port) {
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", host, ":", port, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionListener>> ConnectionListener::Listen(
    const std::string& host, int port, Options options, ConnectionTable& table) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved =
      getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ",
                                               gai_strerror(resolved)));
  }
  const addrinfo* chosen = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
  }
  const int fd = socket(chosen->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return Unavailable("socket", host, port);
  }
  const int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (chosen->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  const bool bound = bind(fd, chosen->ai_addr, chosen->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!bound || listen(fd, SOMAXCONN) != 0) {
    absl::Status failed = Unavailable(bound ? "listen" : "bind", host, port);
    close(fd);
    return failed;
  }
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
  const int bound_port = ntohs(local.ss_family == AF_INET
                                   ? reinterpret_cast<sockaddr_in*>(&local)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  std::unique_ptr<ConnectionListener> listener(
      new ConnectionListener(fd, bound_port, options, table));
  if (listener->epoll_fd_ < 0 || listener->stop_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               ": out of descriptors"));
  }
  return listener;
}

ConnectionListener::ConnectionListener(int listen_fd, int port, Options options,
                                       ConnectionTable& table)
    : listen_fd_(listen_fd), port_(port), options_(options), table_(table) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_event listen{};
  listen.events = EPOLLIN;
  listen.data.u64 = kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &listen);
  epoll_event stop{};
  stop.events = EPOLLIN;
  stop.data.u64 = kStopTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &stop);
}

ConnectionListener::~ConnectionListener() { Stop(); }

void ConnectionListener::Start(std::function<void(int fd)> hand_over) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || thread_.joinable()) return;
  hand_over_ = std::move(hand_over);
  thread_ = std::thread([this] { Loop(); });
}

void ConnectionListener::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (const auto& [serial, watch] : watched_) close(watch);
  watched_.clear();
  for (int* fd : {&listen_fd_, &epoll_fd_, &stop_fd_, &reserve_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

ConnectionListener::Stats ConnectionListener::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void ConnectionListener::Loop() {
  epoll_event events[64];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "looptool-server: connection listener stopped: epoll_wait: %s\n",
                   std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kStopTag) return;
      if (tag == kListenTag) {
        AcceptAll();
      } else {
        Forget(tag);  // hung up, or closed by gRPC
      }
    }
  }
}

void ConnectionListener::AcceptAll() {
  // At most 64 a turn: hang-ups (and Stop) are seen between turns under a flood of connections.
  for (int turn = 0; turn < 64; ++turn) {
    sockaddr_storage addr{};
    socklen_t length = sizeof(addr);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
      // Shed the connection we cannot keep, with the reserve descriptor, so that it does not
      // wait in the backlog (and keep the socket readable) for ever; free descriptors for the
      // next one.
      bool shed = false;
      if (reserve_fd_ >= 0) {
        close(reserve_fd_);
        const int doomed = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (doomed >= 0) {
          close(doomed);
          shed = true;
        }
      }
      const bool freed = EvictIdlest();
      reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      {
        absl::MutexLock lock(&mu_);
        stats_.shed += shed ? 1 : 0;
      }
      if (!shed && !freed) absl::SleepFor(absl::Milliseconds(50));  // nothing to give back yet
      return;  // the loop comes back while connections wait
    }
    if (fd < 0) return;  // EAGAIN: none left (level-triggered: more wake the loop again)
    if (table_.open() >= options_.max_connections) EvictIdlest();
    const int watch = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    epoll_event hangup{};
    hangup.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    if (watch < 0) {
      close(fd);
      EvictIdlest();
      absl::MutexLock lock(&mu_);
      ++stats_.shed;
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const uint64_t serial = table_.Opened(fd, AddressOf(addr), absl::Now());
    hangup.data.u64 = serial;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watch, &hangup) != 0) {
      close(watch);
      close(fd);
      table_.Closed(serial, absl::Now());
      absl::MutexLock lock(&mu_);
      ++stats_.shed;
      continue;
    }
    watched_[serial] = watch;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.accepted;
    }
    hand_over_(fd);
  }
}

bool ConnectionListener::EvictIdlest() {
  const std::optional<uint64_t> victim = table_.LongestIdle();
  if (!victim.has_value()) return false;
  if (auto it = watched_.find(*victim); it != watched_.end()) shutdown(it->second, SHUT_RDWR);
  Forget(*victim);
  absl::MutexLock lock(&mu_);
  ++stats_.evicted;
  return true;
}

void ConnectionListener::Forget(uint64_t serial) {
  auto it = watched_.find(serial);
  if (it == watched_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
  close(it->second);
  watched_.erase(it);
  table_.Closed(serial, absl::Now());
}

}  // namespace looptool::service
