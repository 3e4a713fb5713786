// ConnectionListener: accepts a plaintext server's TCP connections itself and relays each one to
// gRPC through a socket pair whose other end it hands over (grpc::AddInsecureChannelFromFd),
// because gRPC 1.51's own listener can neither bound its connections nor say when one ends,
// stops accepting for good once it runs out of descriptors (grpc/grpc issues 16058 and 20418),
// and holds a client to its streams limit only once the client has acknowledged the server's
// SETTINGS (grpc/grpc PR 34638). With it:
//   1. At most `max_connections` are open: when a new one arrives at the cap, the connection
//      with no call for longest is closed (gRPC clients reconnect when they next call).
//   2. A connection that cannot be taken for want of descriptors is shed (accepted with a
//      descriptor kept in reserve and closed at once), the longest-idle connection is closed to
//      free descriptors, and accepting goes on.
//   3. Every connection is entered in a ConnectionTable when it opens and marked closed when it
//      ends (its peer hangs up, or gRPC closes its end), so calls know their connection and
//      clients that have gone are known.
//   4. Each connection's bytes pass through the listener's thread both ways, at most 64 KiB a
//      turn per connection and at most 64 KiB waiting per direction (a side that does not read
//      stops the other side being read), followed by an Http2StreamGuard: a client that holds
//      more than `max_streams` streams open at once, acknowledged SETTINGS or not, or that does
//      not speak HTTP/2, is closed at once (`cut`).
//   5. A connection with a request whose message has not fully arrived `request_timeout` after
//      its headers is closed (`timed_out`), checked about every second: gRPC keeps such a call
//      for ever, and keepalive pings do not find a client that answers them. So is one whose
//      client has not sent HTTP/2's whole connection preface `handshake_timeout` after it was
//      accepted (gRPC's own handshake deadline does not apply to a connection handed over).
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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/connection_table.h"
#include "service/http2_stream_guard.h"

namespace looptool::service {

class ConnectionListener {
 public:
  struct Options {
    int max_connections = 4096;
    int max_streams = 16;  // per connection, open at once (the server's advertised limit)
    absl::Duration request_timeout = absl::InfiniteDuration();
    absl::Duration handshake_timeout = absl::InfiniteDuration();
  };
  struct Stats {
    int64_t accepted = 0;
    int64_t evicted = 0;  // closed to make room (1.) or to free descriptors (2.)
    int64_t shed = 0;     // refused for want of descriptors (2.)
    int64_t cut = 0;      // closed for more streams than allowed or for not speaking HTTP/2 (4.)
    int64_t timed_out = 0;  // closed for a request unfinished past request_timeout (5.)
    int64_t handshake_timed_out = 0;  // closed for no preface within handshake_timeout (5.)
  };

  // Binds `host` (an address, "localhost" or a name; IPv4 preferred when it has both) and
  // `port` (0: a free one) and listens; connections wait in the kernel's backlog until Start.
  // `table` must outlive this. UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<ConnectionListener>> Listen(const std::string& host,
                                                                    int port, Options options,
                                                                    ConnectionTable& table);
  ~ConnectionListener();  // Stop()

  // Accepts and relays from now on, on the listener's own thread, giving gRPC's end of each
  // connection's socket pair (non-blocking) to `hand_over`, which owns it from then on. Once
  // only; nothing after Stop.
  void Start(std::function<void(int fd)> hand_over);
  // Closes the listening socket; connections open go on being relayed (a server drains them).
  // Idempotent.
  void StopAccepting();
  // Stops accepting and relaying: every connection is closed (and marked closed in the table).
  // Idempotent.
  void Stop();

  int port() const { return port_; }
  Stats stats() const;

 private:
  // One connection: the client's TCP socket and the listener's end of the pair gRPC reads.
  struct Relay {
    Relay(int max_streams, absl::Time accepted) : accepted(accepted), guard(max_streams) {}
    absl::Time accepted;
    int client = -1;
    int inner = -1;
    std::string to_inner, to_client;  // read from one side, not yet written to the other
    uint32_t client_events = 0, inner_events = 0;  // as registered with epoll
    Http2StreamGuard guard;
  };

  ConnectionListener(int listen_fd, int port, Options options, ConnectionTable& table);
  void Loop();
  void AcceptAll();
  // Moves what is ready on one side of `serial` to the other; false when the connection is to
  // be closed (a side ended or failed, or the client broke the guard).
  bool Serve(Relay& relay, bool client_side, uint32_t events);
  bool Pump(Relay& relay, bool from_client);
  void CloseLate();  // 5.
  void Rearm(uint64_t serial, Relay& relay);
  // Closes the connection idle longest: gRPC sees its end closed too.
  bool EvictIdlest();  // whether there was one
  void Close(uint64_t serial);  // stop relaying, close; the table marks it closed

  int listen_fd_;
  const int port_;
  const Options options_;
  ConnectionTable& table_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;     // eventfd: Stop wakes the loop
  int reserve_fd_ = -1;  // kept open to be freed when descriptors run out
  std::function<void(int)> hand_over_;
  std::map<uint64_t, Relay> relays_;  // by serial (loop thread only)
  std::string scratch_;               // one read's bytes (loop thread only)
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_CONNECTION_LISTENER_H_
