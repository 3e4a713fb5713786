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
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace looptool::service {
namespace {

// epoll tags: a connection's sides are 2 * serial (the client) and 2 * serial + 1 (gRPC's pair).
constexpr uint64_t kStopTag = 0;  // serials start at 1
constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr size_t kTurnBytes = 64 << 10;  // read per side per turn; the most left waiting
constexpr uint32_t kReadable = EPOLLIN | EPOLLRDHUP;

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
  scratch_.resize(kTurnBytes);
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

void ConnectionListener::StopAccepting() {
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_) return;
    accepting_ = false;
    // Not started: nothing else uses the socket.
    if (!thread_.joinable() && listen_fd_ >= 0) {
      close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
  }
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
}

void ConnectionListener::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    accepting_ = false;
  }
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  while (!relays_.empty()) Close(relays_.begin()->first);
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
  const bool timing = options_.request_timeout != absl::InfiniteDuration() ||
                      options_.handshake_timeout != absl::InfiniteDuration();
  absl::Time next_check = absl::Now() + absl::Seconds(1);
  while (true) {
    if (timing && absl::Now() >= next_check) {
      CloseLate();
      next_check = absl::Now() + absl::Seconds(1);
    }
    const int n = epoll_wait(epoll_fd_, events, 64, timing ? 1000 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "looptool-server: connection listener stopped: epoll_wait: %s\n",
                   std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kStopTag) {
        uint64_t count;
        (void)!read(stop_fd_, &count, sizeof(count));
        absl::MutexLock lock(&mu_);
        if (stopped_) return;
        if (!accepting_ && listen_fd_ >= 0) {
          epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          close(listen_fd_);
          listen_fd_ = -1;
        }
      } else if (tag == kListenTag) {
        if (listen_fd_ >= 0) AcceptAll();
      } else {
        const uint64_t serial = tag >> 1;
        auto it = relays_.find(serial);
        if (it == relays_.end()) continue;  // closed earlier in this batch
        if (Serve(it->second, (tag & 1) == 0, events[i].events)) {
          Rearm(serial, it->second);
        } else {
          Close(serial);
        }
      }
    }
  }
}

void ConnectionListener::AcceptAll() {
  // At most 64 a turn: relaying (and Stop) goes on between turns under a flood of connections.
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
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
      close(fd);
      EvictIdlest();
      absl::MutexLock lock(&mu_);
      ++stats_.shed;
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const uint64_t serial = table_.Opened(pair[1], AddressOf(addr), absl::Now());
    Relay& relay = relays_.emplace(serial, Relay(options_.max_streams, absl::Now())).first->second;
    relay.client = fd;
    relay.inner = pair[0];
    epoll_event client{}, inner{};
    client.events = relay.client_events = kReadable;
    client.data.u64 = 2 * serial;
    inner.events = relay.inner_events = kReadable;
    inner.data.u64 = 2 * serial + 1;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &client) != 0 ||
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pair[0], &inner) != 0) {
      close(pair[1]);
      Close(serial);
      absl::MutexLock lock(&mu_);
      ++stats_.shed;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.accepted;
    }
    hand_over_(pair[1]);
  }
}

bool ConnectionListener::Serve(Relay& relay, bool client_side, uint32_t events) {
  if (events & (EPOLLHUP | EPOLLERR)) return false;
  const int fd = client_side ? relay.client : relay.inner;
  std::string& outgoing = client_side ? relay.to_client : relay.to_inner;
  if ((events & EPOLLOUT) && !outgoing.empty()) {
    const ssize_t sent = send(fd, outgoing.data(), outgoing.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (sent > 0) outgoing.erase(0, static_cast<size_t>(sent));
    if (outgoing.empty()) std::string().swap(outgoing);  // an idle connection holds no buffer
  }
  const std::string& incoming = client_side ? relay.to_inner : relay.to_client;
  if ((events & kReadable) && incoming.empty()) return Pump(relay, client_side);
  return true;
}

bool ConnectionListener::Pump(Relay& relay, bool from_client) {
  const int from = from_client ? relay.client : relay.inner;
  const int to = from_client ? relay.inner : relay.client;
  std::string& waiting = from_client ? relay.to_inner : relay.to_client;
  const ssize_t got = read(from, scratch_.data(), scratch_.size());
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (got == 0) {
    // gRPC closed its end (its GOAWAY, if any, was passed on before): what the client has not
    // taken yet gets one try.
    if (!from_client && !relay.to_client.empty()) {
      (void)!send(to, relay.to_client.data(), relay.to_client.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    return false;
  }
  const absl::string_view bytes(scratch_.data(), static_cast<size_t>(got));
  if (from_client) {
    if (!relay.guard.FromClient(bytes, absl::Now())) {
      absl::MutexLock lock(&mu_);
      ++stats_.cut;
      return false;
    }
  } else {
    relay.guard.FromServer(bytes);
  }
  ssize_t sent = send(to, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    sent = 0;
  }
  if (static_cast<size_t>(sent) < bytes.size()) {
    waiting.assign(bytes.data() + sent, bytes.size() - static_cast<size_t>(sent));
  }
  return true;
}

void ConnectionListener::Rearm(uint64_t serial, Relay& relay) {
  // A side is read while nothing it sent waits for the other, and written while something for
  // it waits.
  const uint32_t client = (relay.to_inner.empty() ? kReadable : 0) |
                          (relay.to_client.empty() ? 0 : uint32_t{EPOLLOUT});
  const uint32_t inner = (relay.to_client.empty() ? kReadable : 0) |
                         (relay.to_inner.empty() ? 0 : uint32_t{EPOLLOUT});
  if (client != relay.client_events) {
    epoll_event e{};
    e.events = relay.client_events = client;
    e.data.u64 = 2 * serial;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, relay.client, &e);
  }
  if (inner != relay.inner_events) {
    epoll_event e{};
    e.events = relay.inner_events = inner;
    e.data.u64 = 2 * serial + 1;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, relay.inner, &e);
  }
}

void ConnectionListener::CloseLate() {
  const absl::Time now = absl::Now();
  const absl::Time opened_before = now - options_.request_timeout;
  const absl::Time accepted_before = now - options_.handshake_timeout;
  std::vector<uint64_t> late, silent;
  for (const auto& [serial, relay] : relays_) {
    if (!relay.guard.preface_complete()) {
      if (relay.accepted < accepted_before) silent.push_back(serial);
      continue;
    }
    const std::optional<absl::Time> oldest = relay.guard.OldestUnfinishedRequest();
    if (oldest.has_value() && *oldest < opened_before) late.push_back(serial);
  }
  for (uint64_t serial : late) Close(serial);
  for (uint64_t serial : silent) Close(serial);
  absl::MutexLock lock(&mu_);
  stats_.timed_out += static_cast<int64_t>(late.size());
  stats_.handshake_timed_out += static_cast<int64_t>(silent.size());
}

bool ConnectionListener::EvictIdlest() {
  const std::optional<uint64_t> victim = table_.LongestIdle();
  if (!victim.has_value()) return false;
  Close(*victim);
  absl::MutexLock lock(&mu_);
  ++stats_.evicted;
  return true;
}

void ConnectionListener::Close(uint64_t serial) {
  auto it = relays_.find(serial);
  if (it != relays_.end()) {
    for (int fd : {it->second.client, it->second.inner}) {
      if (fd < 0) continue;
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
    }
    relays_.erase(it);
  }
  table_.Closed(serial, absl::Now());
}

}  // namespace looptool::service
