// Http2StreamGuard: follows one HTTP/2 connection (RFC 9113) from the frame headers of the bytes
// each side sends, and says when the client holds more streams open at once than allowed.
//
// gRPC 1.51 holds a client to its SETTINGS_MAX_CONCURRENT_STREAMS only once the client has
// acknowledged the server's SETTINGS; a client that never does can open streams without bound
// (headers and no body: each a call gRPC keeps). The guard holds every client to the limit
// whether it acknowledged or not, so a relay can close a connection that goes over it.
//
// Contract:
//   1. The client's bytes start with HTTP/2's 24-byte connection preface; anything else breaks
//      the protocol. Frames are then read by their 9-byte headers only (payloads are skipped),
//      in any pieces the bytes arrive in.
//   2. A stream is open from the client's HEADERS frame that starts it (an odd stream id above
//      every one before) until either side resets it (RST_STREAM) or the server ends its side
//      (END_STREAM on the server's HEADERS or DATA): a stream counts against the limit until
//      the server has answered it, as in gRPC's own count.
//   3. A stream's request is unfinished from the HEADERS that open it until the client ends its
//      side (END_STREAM on its HEADERS or DATA) or the stream closes; `OldestUnfinishedRequest`
//      gives when the oldest such stream opened (LoopTool's calls are unary: a request whose
//      message never completes never reaches the service, and gRPC would keep it for ever).
//   4. The client breaks the limit when a new stream would make more than `max_streams` open;
//      from then on (and after a broken preface) FromClient returns false, and `violation()`
//      says why. A well-behaved gRPC client never breaks it: it reads the limit from the
//      server's SETTINGS before it opens a stream and queues calls beyond it.
// Not thread-safe; one per connection.
#ifndef LOOPTOOL_SERVICE_HTTP2_STREAM_GUARD_H_
#define LOOPTOOL_SERVICE_HTTP2_STREAM_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace looptool::service {

class Http2StreamGuard {
 public:
  explicit Http2StreamGuard(int max_streams) : max_streams_(max_streams) {}

  // The next bytes the client sent, at `now`. False once the client broke the protocol or the
  // limit.
  bool FromClient(absl::string_view bytes, absl::Time now = absl::UnixEpoch());
  // The next bytes the server sent.
  void FromServer(absl::string_view bytes);

  int open_streams() const { return static_cast<int>(open_.size()); }
  // Whether the client's whole connection preface has arrived (its HTTP/2 handshake).
  bool preface_complete() const;
  // When the oldest stream whose request is unfinished opened; nullopt when there is none.
  std::optional<absl::Time> OldestUnfinishedRequest() const;
  // Streams the client started, in all.
  int64_t streams_started() const { return started_; }
  bool broken() const { return !violation_.empty(); }
  const std::string& violation() const { return violation_; }

 private:
  // Cuts a byte stream into frame headers.
  struct FrameReader {
    unsigned char header[9] = {};
    size_t header_bytes = 0;   // of the current header read so far
    size_t payload_left = 0;   // bytes of the current payload still to skip
    // Calls on_frame(type, flags, stream) for each complete header in `bytes`.
    template <typename OnFrame>
    void Feed(absl::string_view bytes, OnFrame on_frame);
  };
  void ClientFrame(uint8_t type, uint8_t flags, uint32_t stream, absl::Time now);
  void ServerFrame(uint8_t type, uint8_t flags, uint32_t stream);

  const int max_streams_;
  size_t preface_seen_ = 0;
  FrameReader client_, server_;
  std::set<uint32_t> open_;  // at most max_streams_ + 1
  std::map<uint32_t, absl::Time> unfinished_;  // open streams whose request is not complete
  uint32_t last_started_ = 0;
  int64_t started_ = 0;
  std::string violation_;
};

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_HTTP2_STREAM_GUARD_H_
