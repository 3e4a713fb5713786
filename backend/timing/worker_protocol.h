// The conversation between a WorkerPool and one kernel worker process: length-prefixed frames
// over a socket, one request and one reply at a time. No gRPC, no protobuf: two small records.
#ifndef LOOPTOOL_BACKEND_TIMING_WORKER_PROTOCOL_H_
#define LOOPTOOL_BACKEND_TIMING_WORKER_PROTOCOL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

// What the worker is asked to do. kExtension goes to the WorkerExtension its binary installed
// (tests install a fault injector; production binaries none: UNIMPLEMENTED).
// kRemeasure times a schedule again (LocalTimer::RemeasureFor).
// kMemory measures the memory's bandwidth (LocalTimer::Memory).
// kPrepare computes a program's reference run ahead of its first measurement
// (LocalTimer::Prepare).
enum class WorkerTask : char {
  kMeasure = 'M',
  kPrepare = 'V',
  kRemeasure = 'R',
  kPeak = 'P',
  kMemory = 'B',
  kExtension = 'X'
};

struct WorkerRequest {
  WorkerTask task = WorkerTask::kMeasure;
  // kMeasure, kRemeasure, kPrepare: PrintIr of the loop tree (program and schedule); kExtension: its
  // argument.
  std::string payload;
};

// The worker's answer: a Measurement, or the status that replaced it. kPeak answers with the
// peak in `gflops`, kMemory with `memory`, kPrepare with the reference run's seconds in
// `seconds` (0: the worker had it).
struct WorkerReply {
  absl::Status status;
  Measurement measurement;
  MemoryProfile memory;
};

std::string EncodeRequest(const WorkerRequest& request);
absl::StatusOr<WorkerRequest> DecodeRequest(absl::string_view frame);
std::string EncodeReply(const WorkerReply& reply);
absl::StatusOr<WorkerReply> DecodeReply(absl::string_view frame);

// Largest frame either side accepts (a program's IR is bounded far below this).
inline constexpr size_t kMaxFrameBytes = 1 << 20;

// Writes one frame (4-byte little-endian length, then the payload). Never raises SIGPIPE.
absl::Status WriteFrame(int fd, absl::string_view payload);
// Reads one frame. UNAVAILABLE on end of file (the peer is gone); DEADLINE_EXCEEDED when
// `deadline_ms` (>= 0) passes first; -1 waits forever.
absl::StatusOr<std::string> ReadFrame(int fd, int deadline_ms);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_WORKER_PROTOCOL_H_
