#include "backend/timing/worker_protocol.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

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
    case 'V': r.task = WorkerTask::kPrepare; break;
    case 'P': r.task = WorkerTask::kPeak; break;
    case 'B': r.task = WorkerTask::kMemory; break;
    case 'X': r.task = WorkerTask::kExtension; break;
    default: return absl::InvalidArgumentError("unknown worker task");
  }
  r.payload = std::string(frame.substr(1));
  return r;
}

// "<code> <seconds> <gflops> <peak_gflops> <timing> <timed_runs> <work_seconds> <lines>\n"
// (timing: its TimingName), then `lines` lines of the memory profile,
// "level <name> <bytes>\n" for each level, "point <bytes> <gbytes_per_second>\n" for each
// point of the read curve, "copy <bytes> <gbytes_per_second>\n" for each point of the copy
// curve and "fill <bytes> <gbytes_per_second>\n" for each point of the fill curve, then the
// message; numbers printed exactly (%a round-trips doubles).
std::string EncodeReply(const WorkerReply& reply) {
  char numbers[256];  // the header's longest: 7 numbers, a timing name, spaces (~170)
  std::snprintf(numbers, sizeof(numbers), "%d %a %a %a %s %lld %a %zu\n",
                static_cast<int>(reply.status.code()), reply.measurement.seconds,
                reply.measurement.gflops, reply.measurement.peak_gflops,
                TimingName(reply.measurement.timing),
                static_cast<long long>(reply.measurement.timed_runs),
                reply.measurement.work_seconds,
                reply.memory.levels.size() + reply.memory.bandwidth.size() +
                    reply.memory.copy_bandwidth.size() + reply.memory.fill_bandwidth.size());
  std::string out = numbers;
  for (const MemoryLevel& level : reply.memory.levels) {
    absl::StrAppend(&out, "level ", level.name, " ", level.bytes, "\n");
  }
  for (const auto& [kind, curve] : {std::pair{"point", &reply.memory.bandwidth},
                                    std::pair{"copy", &reply.memory.copy_bandwidth},
                                    std::pair{"fill", &reply.memory.fill_bandwidth}}) {
    for (const BandwidthPoint& p : *curve) {
      std::snprintf(numbers, sizeof(numbers), "%s %lld %a\n", kind,
                    static_cast<long long>(p.bytes), p.gbytes_per_second);
      absl::StrAppend(&out, numbers);
    }
  }
  absl::StrAppend(&out, reply.status.message());
  return out;
}

absl::StatusOr<WorkerReply> DecodeReply(absl::string_view frame) {
  const auto malformed = [] { return absl::InternalError("malformed worker reply"); };
  size_t nl = frame.find('\n');
  if (nl == absl::string_view::npos) return malformed();
  std::vector<std::string> parts = absl::StrSplit(frame.substr(0, nl), ' ');
  int code = 0;
  size_t lines = 0;
  int64_t timed_runs = 0;
  std::optional<Measurement::Timing> timing;
  if (parts.size() != 8 || !absl::SimpleAtoi(parts[0], &code) ||
      !(timing = TimingFromName(parts[4])) || !absl::SimpleAtoi(parts[5], &timed_runs) ||
      !absl::SimpleAtoi(parts[7], &lines) || lines > 256) {
    return malformed();
  }
  WorkerReply r;
  r.measurement.timing = *timing;
  r.measurement.timed_runs = timed_runs;
  r.measurement.seconds = std::strtod(parts[1].c_str(), nullptr);
  r.measurement.gflops = std::strtod(parts[2].c_str(), nullptr);
  r.measurement.peak_gflops = std::strtod(parts[3].c_str(), nullptr);
  r.measurement.work_seconds = std::strtod(parts[6].c_str(), nullptr);
  frame.remove_prefix(nl + 1);
  for (size_t i = 0; i < lines; ++i) {
    nl = frame.find('\n');
    if (nl == absl::string_view::npos) return malformed();
    std::vector<std::string> line = absl::StrSplit(frame.substr(0, nl), ' ');
    int64_t bytes = 0;
    if (line.size() != 3 || !absl::SimpleAtoi(line[line[0] == "level" ? 2 : 1], &bytes)) {
      return malformed();
    }
    if (line[0] == "level" && !line[1].empty()) {
      r.memory.levels.push_back({line[1], bytes});
    } else if (line[0] == "point") {
      r.memory.bandwidth.push_back({bytes, std::strtod(line[2].c_str(), nullptr)});
    } else if (line[0] == "copy") {
      r.memory.copy_bandwidth.push_back({bytes, std::strtod(line[2].c_str(), nullptr)});
    } else if (line[0] == "fill") {
      r.memory.fill_bandwidth.push_back({bytes, std::strtod(line[2].c_str(), nullptr)});
    } else {
      return malformed();
    }
    frame.remove_prefix(nl + 1);
  }
  r.status = absl::Status(static_cast<absl::StatusCode>(code), frame);
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
