// ConnectionListener: accepts a plaintext server's TCP connections itself and hands each one's
// descriptor to gRPC (grpc::AddInsecureChannelFromFd), because gRPC 1.51's own listener can
// neither bound its connections nor say when one ends, and stops accepting for good once it
// runs out of descriptors (grpc/grpc issues 16058 and 20418). With it:
//   1. At most `max_connections` are open: when a new one arrives at the cap, the connection
//      with no call for longest is closed (gRPC clients reconnect when they next call).
//   2. A connection that cannot be taken for want of descriptors is shed (accepted with a
//      descriptor kept in reserve and closed at once), the longest-idle connection is closed to
//      free descriptors, and accepting goes on.
//   3. Every connection is entered in a ConnectionTable when it opens and marked closed when it
//      ends (its peer hangs up, or gRPC closes it: the listener watches a duplicate of each
//      descriptor for the hang-up), so calls know their connection and clients that have gone
//      are known.
// TLS servers keep gRPC's listener (the handshake is gRPC's) and so none of the above.
#ifndef LOOPTOOL_SERVICE_CONNECTION_LISTENER_H_
#define LOOPTOOL_SERVICE_CONNECTION_LISTENER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "service/connection_table.h"

namespace looptool::service {

class ConnectionListener {
 public:
  struct Options {
    int max_connections = 4096;
  };
  struct Stats {
    int64_t accepted = 0;
    int64_t evicted = 0;  // closed to make room (1.) or to free descriptors (2.)
    int64_t shed = 0;     // refused for want of descriptors (2.)
  };

  // Binds `host` (an address, "localhost" or a name; IPv4 preferred when it has both) and
  // `port` (0: a free one) and listens; connections wait in the kernel's backlog until Start.
  // `table` must outlive this. UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<ConnectionListener>> Listen(const std::string& host,
                                                                    int port, Options options,
                                                                    ConnectionTable& table);
  ~ConnectionListener();  // Stop()

  // Accepts from now on, on the listener's own thread, giving each connection's descriptor
  // (non-blocking, TCP_NODELAY) to `hand_over`, which owns it from then on. Once only; nothing
  // after Stop.
  void Start(std::function<void(int fd)> hand_over);
  // Stops accepting and watching, and closes the listening socket; connections handed over stay
  // open (their end is no longer entered in the table). Idempotent.
  void Stop();

  int port() const { return port_; }
  Stats stats() const;

 private:
  ConnectionListener(int listen_fd, int port, Options options, ConnectionTable& table);
  void Loop();
  void AcceptAll();
  // Closes the connection idle longest (shutdown: gRPC sees it closed too).
  bool EvictIdlest();  // whether there was one
  void Forget(uint64_t serial);  // stop watching; the table marks it closed

  int listen_fd_;
  const int port_;
  const Options options_;
  ConnectionTable& table_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;     // eventfd: Stop wakes the loop
  int reserve_fd_ = -1;  // kept open to be freed when descriptors run out
  std::function<void(int)> hand_over_;
  std::map<uint64_t, int> watched_;  // serial -> duplicate descriptor (loop thread only)
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_CONNECTION_LISTENER_H_
