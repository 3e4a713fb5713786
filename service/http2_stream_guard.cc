#include "service/http2_stream_guard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace looptool::service {
namespace {

constexpr absl::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// Frame types and flags (RFC 9113, 6).
constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3;
constexpr uint8_t kEndStream = 0x1;

}  // namespace

template <typename OnFrame>
void Http2StreamGuard::FrameReader::Feed(absl::string_view bytes, OnFrame on_frame) {
  while (!bytes.empty()) {
    if (payload_left > 0) {
      const size_t skip = std::min(payload_left, bytes.size());
      payload_left -= skip;
      bytes.remove_prefix(skip);
      continue;
    }
    const size_t take = std::min(sizeof(header) - header_bytes, bytes.size());
    std::copy_n(bytes.data(), take, header + header_bytes);
    header_bytes += take;
    bytes.remove_prefix(take);
    if (header_bytes < sizeof(header)) return;
    header_bytes = 0;
    payload_left = (size_t{header[0]} << 16) | (size_t{header[1]} << 8) | header[2];
    const uint32_t stream = ((uint32_t{header[5]} & 0x7f) << 24) | (uint32_t{header[6]} << 16) |
                            (uint32_t{header[7]} << 8) | header[8];
    on_frame(header[3], header[4], stream);
  }
}

bool Http2StreamGuard::preface_complete() const { return preface_seen_ == kPreface.size(); }

bool Http2StreamGuard::FromClient(absl::string_view bytes, absl::Time now) {
  if (broken()) return false;
  if (preface_seen_ < kPreface.size()) {
    const size_t take = std::min(kPreface.size() - preface_seen_, bytes.size());
    if (bytes.substr(0, take) != kPreface.substr(preface_seen_, take)) {
      violation_ = "not HTTP/2: the connection preface is wrong";
      return false;
    }
    preface_seen_ += take;
    bytes.remove_prefix(take);
  }
  client_.Feed(bytes, [this, now](uint8_t type, uint8_t flags, uint32_t stream) {
    if (!broken()) ClientFrame(type, flags, stream, now);
  });
  return !broken();
}

void Http2StreamGuard::FromServer(absl::string_view bytes) {
  server_.Feed(bytes, [this](uint8_t type, uint8_t flags, uint32_t stream) {
    ServerFrame(type, flags, stream);
  });
}

std::optional<absl::Time> Http2StreamGuard::OldestUnfinishedRequest() const {
  // Stream ids grow with time: the smallest opened first.
  if (unfinished_.empty()) return std::nullopt;
  return unfinished_.begin()->second;
}

void Http2StreamGuard::ClientFrame(uint8_t type, uint8_t flags, uint32_t stream, absl::Time now) {
  if (type == kRstStream) {
    open_.erase(stream);
    unfinished_.erase(stream);
    return;
  }
  if ((type == kHeaders || type == kData) && (flags & kEndStream)) unfinished_.erase(stream);
  // Only the HEADERS that start a client stream open one (trailers and continuations do not).
  if (type != kHeaders || stream % 2 == 0 || stream <= last_started_) return;
  last_started_ = stream;
  ++started_;
  open_.insert(stream);
  if (!(flags & kEndStream)) unfinished_[stream] = now;
  if (static_cast<int>(open_.size()) > max_streams_) {
    violation_ = absl::StrCat("more than ", max_streams_, " streams open at once (stream ",
                              stream, ", ", started_, " started)");
  }
}

void Http2StreamGuard::ServerFrame(uint8_t type, uint8_t flags, uint32_t stream) {
  if (type == kRstStream || ((type == kHeaders || type == kData) && (flags & kEndStream))) {
    open_.erase(stream);
    unfinished_.erase(stream);
  }
}

}  // namespace looptool::service
