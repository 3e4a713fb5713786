#include "backend/timing/worker_protocol.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "backend/timing/measure.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace looptool {
namespace {

int64_t NowMs() { return static_cast<int64_t>(MonotonicSeconds() * 1000); }

// Reads exactly n bytes, waiting at most until `deadline` (absolute ms; -1 = forever).
absl::Status ReadExactly(int fd, char* out, size_t n, int64_t deadline) {
  size_t got = 0;
  while (got < n) {
    if (deadline >= 0) {
      const int64_t left = deadline - NowMs();
      if (left <= 0) return absl::DeadlineExceededError("worker did not answer in time");
      pollfd p{fd, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return absl::InternalError(absl::StrCat("poll failed: errno ", errno));
      if (r == 0) return absl::DeadlineExceededError("worker did not answer in time");
    }
    const ssize_t r = read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(absl::StrCat("read failed: errno ", errno));
    if (r == 0) return absl::UnavailableError("peer closed the connection");
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeRequest(const WorkerRequest& request) {
  return absl::StrCat(std::string(1, static_cast<char>(request.task)), request.payload);
}

absl::StatusOr<WorkerRequest> DecodeRequest(absl::string_view frame) {
  if (frame.empty()) return absl::InvalidArgumentError("empty worker request");
  WorkerRequest r;
  switch (frame[0]) {
    case 'M': r.task = WorkerTask::kMeasure; break;
    case 'R': r.task = WorkerTask::kRemeasure; break;
    case 'P': r.task = WorkerTask::kPeak; break;
    case 'X': r.task = WorkerTask::kExtension; break;
    default: return absl::InvalidArgumentError("unknown worker task");
  }
  r.payload = std::string(frame.substr(1));
  return r;
}

// "<code> <seconds> <gflops>\n<message>", numbers printed exactly (%a round-trips doubles).
std::string EncodeReply(const WorkerReply& reply) {
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), "%d %a %a\n", static_cast<int>(reply.status.code()),
                reply.measurement.seconds, reply.measurement.gflops);
  return absl::StrCat(numbers, reply.status.message());
}

absl::StatusOr<WorkerReply> DecodeReply(absl::string_view frame) {
  const size_t nl = frame.find('\n');
  if (nl == absl::string_view::npos) return absl::InternalError("malformed worker reply");
  std::vector<std::string> parts = absl::StrSplit(frame.substr(0, nl), ' ');
  int code = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &code)) {
    return absl::InternalError("malformed worker reply");
  }
  WorkerReply r;
  r.measurement.seconds = std::strtod(parts[1].c_str(), nullptr);
  r.measurement.gflops = std::strtod(parts[2].c_str(), nullptr);
  r.status = absl::Status(static_cast<absl::StatusCode>(code), frame.substr(nl + 1));
  return r;
}

absl::Status WriteFrame(int fd, absl::string_view payload) {
  if (payload.size() > kMaxFrameBytes) return absl::InvalidArgumentError("frame too large");
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string buf(4 + payload.size(), '\0');
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::copy(payload.begin(), payload.end(), buf.begin() + 4);
  size_t sent = 0;
  while (sent < buf.size()) {
    const ssize_t r = send(fd, buf.data() + sent, buf.size() - sent, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(absl::StrCat("send failed: errno ", errno));
    sent += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFrame(int fd, int deadline_ms) {
  const int64_t deadline = deadline_ms < 0 ? -1 : NowMs() + deadline_ms;
  unsigned char len[4];
  absl::Status s = ReadExactly(fd, reinterpret_cast<char*>(len), 4, deadline);
  if (!s.ok()) return s;
  const uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t{len[3]} << 24);
  if (n > kMaxFrameBytes) return absl::InternalError("frame too large");
  std::string payload(n, '\0');
  s = ReadExactly(fd, payload.data(), n, deadline);
  if (!s.ok()) return s;
  return payload;
}

}  // namespace looptool
