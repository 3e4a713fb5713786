// ConnectionTable: the server's open client connections and the client identities that called
// on each, for fair shares and for ending a client's sessions once it has gone.
//
// A connection is known by the descriptor gRPC reads it from (its calls' peer is "fd:<n>"; the
// newest connection on a descriptor number is the open one) and named
// "conn:<address>#<serial>", unique for the table's life. A call's owner is "user:<name>" for
// a per-client token, else its connection's name (CallContext::owner). An owner is abandoned
// when the last open connection it called on closes, and taken back if it calls again within
// `grace`; TakeAbandoned hands over the owners abandoned for longer, whose sessions the server
// then ends. Thread-safe.
#ifndef LOOPTOOL_SERVICE_CONNECTION_TABLE_H_
#define LOOPTOOL_SERVICE_CONNECTION_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace looptool::service {

// Who a call comes from.
struct Caller {
  std::string connection;  // "conn:<address>#<serial>", or "conn:<peer>" for a peer not ours
  std::string owner;       // "user:<name>" or `connection`
  uint64_t serial = 0;     // the open connection's serial (0 for a peer not ours)
};

class ConnectionTable {
 public:
  explicit ConnectionTable(absl::Duration grace) : grace_(grace) {}

  // A connection from `address` (as gRPC writes peers: "ipv4:127.0.0.1:5555") that gRPC reads
  // from descriptor `fd`; returns its serial (> 0), the key of Closed.
  uint64_t Opened(int fd, const std::string& address, absl::Time now);
  // The connection `serial` has closed (or was closed); unknown serials are ignored.
  void Closed(uint64_t serial, absl::Time now);
  // The caller of a call that arrived with gRPC peer `peer`, sent with the per-client token of
  // `user` ("" for none); notes its owner as calling on that connection at `now`, and the call
  // as running on it until CallEnded. A peer that is not an open connection of this table
  // (gRPC's own listener: "ipv4:...") is its own name.
  Caller Identify(absl::string_view peer, const std::string& user, absl::Time now);
  // A call Identify returned `caller` for has ended (its reply sent or its failure answered).
  void CallEnded(const Caller& caller, absl::Time now);
  // The owners abandoned at or before `now - grace`, with when, forgotten here.
  std::vector<std::pair<std::string, absl::Time>> TakeAbandoned(absl::Time now);
  // The open connection with no call running whose last call (or opening) is oldest; where
  // every open connection has a call running, the one whose last call started earliest;
  // nullopt when none is open.
  std::optional<uint64_t> LongestIdle() const;
  int open() const;

 private:
  struct Connection {
    int fd = -1;
    std::string name;
    absl::Time last_active;
    int running = 0;               // calls identified on it and not yet ended
    std::set<std::string> owners;  // that called on it
  };
  const absl::Duration grace_;
  mutable absl::Mutex mu_;
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Connection> open_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> by_fd_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> connections_of_ ABSL_GUARDED_BY(mu_);  // owner -> open (> 0)
  std::map<std::string, absl::Time> abandoned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_CONNECTION_TABLE_H_
