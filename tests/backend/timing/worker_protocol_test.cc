// The pool-worker wire format on its own: requests and replies round-trip exactly (statuses with
// their code and message), malformed frames are refused, and framing over a socketpair handles
// end of file, deadlines and the frame size limit.
#include "backend/timing/worker_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

using ::testing::HasSubstr;

// A connected pair of stream sockets, closed at the end of the test.
class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  ~SocketPair() {
    CloseA();
    CloseB();
  }
  int a() const { return fds_[0]; }
  int b() const { return fds_[1]; }
  void CloseA() { Close(0); }
  void CloseB() { Close(1); }

 private:
  void Close(int i) {
    if (fds_[i] >= 0) close(fds_[i]);
    fds_[i] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST(WorkerProtocol, EveryRequestRoundTrips) {
  const std::string ir =
      "C[m, n] += A[m, k] * B[k, n]\nm=64 n=80 k=96\ncompute 1: m(64) k(96) n(80)\n";
  const std::string binary("a\0b\n\xff", 5);
  for (const WorkerRequest& request :
       {WorkerRequest{WorkerTask::kMeasure, ir}, WorkerRequest{WorkerTask::kRemeasure, ir},
        WorkerRequest{WorkerTask::kPeak, ""}, WorkerRequest{WorkerTask::kMemory, ""},
        WorkerRequest{WorkerTask::kExtension, "crash"},
        WorkerRequest{WorkerTask::kExtension, binary}}) {
    const std::string frame = EncodeRequest(request);
    // The task is the first byte, the payload the rest.
    EXPECT_EQ(frame[0], static_cast<char>(request.task));
    EXPECT_EQ(frame.substr(1), request.payload);
    auto decoded = DecodeRequest(frame);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->task, request.task);
    EXPECT_EQ(decoded->payload, request.payload);
  }
  EXPECT_EQ(EncodeRequest({WorkerTask::kMeasure, "x"}), "Mx");
  EXPECT_EQ(EncodeRequest({WorkerTask::kPeak, ""}), "P");
  EXPECT_EQ(EncodeRequest({WorkerTask::kMemory, ""}), "B");
  EXPECT_EQ(EncodeRequest({WorkerTask::kRemeasure, "x"}), "Rx");
  EXPECT_EQ(EncodeRequest({WorkerTask::kExtension, "hang"}), "Xhang");
}

TEST(WorkerProtocol, MalformedRequestsAreRefused) {
  const absl::Status empty = DecodeRequest("").status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(), "empty worker request");
  const std::vector<std::string> frames = {"Q", "mC[m] = A[m]", "C", "H", std::string("\0M", 2)};
  for (const std::string& frame : frames) {
    const absl::Status s = DecodeRequest(frame).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << frame;
    EXPECT_EQ(s.message(), "unknown worker task");
  }
}

TEST(WorkerProtocol, OkRepliesRoundTripTheirNumbersExactly) {
  for (const auto& [seconds, gflops] :
       std::vector<std::pair<double, double>>{{1.0 / 3, 0.1},
                                              {1.2345678901234567e-5, 123.45678901234567},
                                              {0, 0},
                                              {std::numeric_limits<double>::denorm_min(), 1e300},
                                              {std::numeric_limits<double>::infinity(), -0.0}}) {
    WorkerReply reply;
    reply.measurement.seconds = seconds;
    reply.measurement.gflops = gflops;
    reply.measurement.peak_gflops = gflops / 3;
    reply.measurement.timing = Measurement::Timing::kSlower;
    reply.measurement.timed_runs = 5;
    reply.measurement.work_seconds = seconds * 7;
    auto decoded = DecodeReply(EncodeReply(reply));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_TRUE(decoded->status.ok()) << decoded->status;
    EXPECT_EQ(decoded->measurement.seconds, seconds);
    EXPECT_EQ(decoded->measurement.gflops, gflops);
    EXPECT_EQ(decoded->measurement.peak_gflops, gflops / 3);
    EXPECT_EQ(std::signbit(decoded->measurement.gflops), std::signbit(gflops));
    EXPECT_EQ(decoded->measurement.timing, Measurement::Timing::kSlower);
    EXPECT_EQ(decoded->measurement.timed_runs, 5);
    EXPECT_EQ(decoded->measurement.work_seconds, seconds * 7);
  }
}

TEST(WorkerProtocol, EveryTimingRoundTripsByName) {
  for (const Measurement::Timing t :
       {Measurement::Timing::kFull, Measurement::Timing::kSettled, Measurement::Timing::kConfirmed,
        Measurement::Timing::kSlower, Measurement::Timing::kOnce, Measurement::Timing::kUntimed,
        Measurement::Timing::kAbandoned}) {
    WorkerReply reply;
    reply.measurement.timing = t;
    reply.measurement.timed_runs = 12;
    auto decoded = DecodeReply(EncodeReply(reply));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->measurement.timing, t) << TimingName(t);
    EXPECT_EQ(decoded->measurement.timed_runs, 12);
    EXPECT_EQ(TimingFromName(TimingName(t)), t);
  }
  EXPECT_EQ(TimingName(Measurement::Timing::kUntimed), std::string("untimed"));
  EXPECT_FALSE(TimingFromName("fast").has_value());
  // An unknown timing makes the reply malformed.
  EXPECT_EQ(DecodeReply("0 0x0p+0 0x0p+0 0x0p+0 fast 1 0x0p+0 0\n").status().code(),
            absl::StatusCode::kInternal);
}

TEST(WorkerProtocol, MemoryProfilesRoundTripExactly) {
  WorkerReply reply;
  reply.memory.levels = {{"L1", 49152}, {"L2", 1 << 20}, {"DRAM", 0}};
  reply.memory.bandwidth = {{4096, 1.0 / 3}, {int64_t{1} << 30, 123.456789012345678},
                            {8192, 1e-300}};
  reply.memory.copy_bandwidth = {{8192, 2.0 / 3}, {int64_t{1} << 26, 77.25}};
  reply.memory.fill_bandwidth = {{4096, 5.0 / 7}};
  reply.status = absl::Status(absl::StatusCode::kDataLoss, "a\nb");
  const std::string frame = EncodeReply(reply);
  EXPECT_EQ(frame.substr(0, frame.find("point")),
            "15 0x0p+0 0x0p+0 0x0p+0 full 0 0x0p+0 9\n"
            "level L1 49152\nlevel L2 1048576\nlevel DRAM 0\n");
  auto decoded = DecodeReply(frame);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->memory.levels.size(), 3u);
  ASSERT_EQ(decoded->memory.bandwidth.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(decoded->memory.levels[i].name, reply.memory.levels[i].name);
    EXPECT_EQ(decoded->memory.levels[i].bytes, reply.memory.levels[i].bytes);
    EXPECT_EQ(decoded->memory.bandwidth[i].bytes, reply.memory.bandwidth[i].bytes);
    EXPECT_EQ(decoded->memory.bandwidth[i].gbytes_per_second,
              reply.memory.bandwidth[i].gbytes_per_second);
  }
  ASSERT_EQ(decoded->memory.copy_bandwidth.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(decoded->memory.copy_bandwidth[i].bytes, reply.memory.copy_bandwidth[i].bytes);
    EXPECT_EQ(decoded->memory.copy_bandwidth[i].gbytes_per_second,
              reply.memory.copy_bandwidth[i].gbytes_per_second);
  }
  ASSERT_EQ(decoded->memory.fill_bandwidth.size(), 1u);
  EXPECT_EQ(decoded->memory.fill_bandwidth[0].bytes, 4096);
  EXPECT_EQ(decoded->memory.fill_bandwidth[0].gbytes_per_second, 5.0 / 7);
  EXPECT_EQ(decoded->status, reply.status);
}

TEST(WorkerProtocol, ErrorRepliesKeepCodeAndMessage) {
  const std::vector<absl::Status> statuses = {
      absl::InternalError("kernel failed verification: C[3] = 5 where the reference "
                          "interpreter computes 7; schedule:\nC[m, n] += ...\ncursor 1 1\n"),
      absl::InvalidArgumentError("bad ir"),
      absl::DeadlineExceededError("worker did not answer in time"),
      absl::ResourceExhaustedError("Kernel too costly to evaluate on this server: 17.2 GFLOP"),
      absl::UnimplementedError("no worker extension installed"),
      absl::UnavailableError(""),
      absl::Status(absl::StatusCode::kDataLoss, "line one\nline two\n\nlast"),
  };
  for (const absl::Status& status : statuses) {
    WorkerReply reply;
    reply.status = status;
    reply.measurement.seconds = 0.25;
    auto decoded = DecodeReply(EncodeReply(reply));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->status.code(), status.code()) << status;
    EXPECT_EQ(decoded->status.message(), status.message());
    EXPECT_EQ(decoded->status, status);
    EXPECT_EQ(decoded->measurement.seconds, 0.25);
  }
}

TEST(WorkerProtocol, MalformedRepliesAreRefused) {
  // Header: code, seconds, gflops, peak, timing, timed runs, work seconds, lines of the memory
  // profile.
  ASSERT_TRUE(DecodeReply("0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\nlevel L1 4096\n").ok());
  for (const std::string frame :
       {"", "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 0", "0 0x1p+0\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3\n", "0 0x1p+0 0x1p+1 0x0p+0 7\n",
        "zero 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 0\n",
        " 0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 0\n", "\nmessage",
        "0 0x1p+0 0x1p+1 0x0p+0 full x 0x0p+0 0\n", "0 0x1p+0 0x1p+1 0x0p+0 Full 3 0x0p+0 0\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\nlevel L1\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\nlevel L1 x\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\nlevel  1\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\npoint 4096\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 1\nL1 4096 0x1p+0\n",
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 0x0p+0 257\n",
        // a reply of before work_seconds
        "0 0x1p+0 0x1p+1 0x0p+0 full 3 1\nlevel L1 4096\n"}) {
    const absl::Status s = DecodeReply(frame).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << "'" << frame << "'";
    EXPECT_EQ(s.message(), "malformed worker reply");
  }
}

TEST(WorkerProtocol, FramesAreLittleEndianLengthThenPayload) {
  SocketPair p;
  ASSERT_TRUE(WriteFrame(p.a(), "abc").ok());
  char raw[7];
  ASSERT_EQ(read(p.b(), raw, sizeof(raw)), 7);
  EXPECT_EQ(std::string(raw, 7), std::string("\x03\x00\x00\x00" "abc", 7));
  // A length of 0x00010203: its bytes come lowest first.
  const std::string big(0x010203, 'z');
  std::thread writer([&] { EXPECT_TRUE(WriteFrame(p.a(), big).ok()); });
  unsigned char len[4];
  EXPECT_EQ(read(p.b(), len, 4), 4);
  std::string payload;
  char buffer[65536];
  while (payload.size() < big.size()) {
    const ssize_t r = read(p.b(), buffer, sizeof(buffer));
    if (r <= 0) break;
    payload.append(buffer, r);
  }
  writer.join();
  EXPECT_EQ(len[0], 0x03);
  EXPECT_EQ(len[1], 0x02);
  EXPECT_EQ(len[2], 0x01);
  EXPECT_EQ(len[3], 0x00);
  EXPECT_EQ(payload, big);
}

TEST(WorkerProtocol, FramesRoundTripOverASocketPair) {
  SocketPair p;
  const std::string largest(kMaxFrameBytes, 'x');
  const std::vector<std::string> payloads = {"", "hello", std::string("\0\n\xff", 3),
                                             EncodeRequest({WorkerTask::kPeak, ""}), largest};
  // The largest frame does not fit in a socket buffer: write from another thread.
  std::thread writer([&] {
    for (const std::string& payload : payloads) EXPECT_TRUE(WriteFrame(p.a(), payload).ok());
  });
  for (const std::string& payload : payloads) {
    auto got = ReadFrame(p.b(), 30000);
    if (!got.ok()) {
      ADD_FAILURE() << got.status();
      shutdown(p.b(), SHUT_RDWR);  // let the writer fail rather than block
      break;
    }
    EXPECT_EQ(*got, payload);
  }
  writer.join();
  // And in the other direction, waiting forever.
  ASSERT_TRUE(WriteFrame(p.b(), "back").ok());
  auto back = ReadFrame(p.a(), -1);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "back");
}

TEST(WorkerProtocol, ReadWaitsForALateWriterWithoutADeadline) {
  SocketPair p;
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_TRUE(WriteFrame(p.a(), "late").ok());
  });
  auto got = ReadFrame(p.b(), -1);
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "late");
}

TEST(WorkerProtocol, EndOfFileIsUnavailable) {
  {
    SocketPair p;
    p.CloseA();
    const absl::Status s = ReadFrame(p.b(), 5000).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_EQ(s.message(), "peer closed the connection");
  }
  {
    // The peer dies in the middle of a frame: 10 bytes announced, 3 sent.
    SocketPair p;
    ASSERT_EQ(write(p.a(), "\x0a\x00\x00\x00" "abc", 7), 7);
    p.CloseA();
    EXPECT_EQ(ReadFrame(p.b(), -1).status().code(), absl::StatusCode::kUnavailable);
  }
  {
    // In the middle of the length.
    SocketPair p;
    ASSERT_EQ(write(p.a(), "\x0a\x00", 2), 2);
    p.CloseA();
    EXPECT_EQ(ReadFrame(p.b(), 5000).status().code(), absl::StatusCode::kUnavailable);
  }
}

TEST(WorkerProtocol, WritingToAClosedPeerIsUnavailableNotSigpipe) {
  SocketPair p;
  p.CloseB();
  // SIGPIPE's default action would end this test process here.
  const absl::Status s = WriteFrame(p.a(), "anyone?");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("send failed"));
}

TEST(WorkerProtocol, ASilentPeerIsDeadlineExceeded) {
  SocketPair p;
  absl::Time start = absl::Now();
  absl::Status s = ReadFrame(p.b(), 150).status();
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(), "worker did not answer in time");
  EXPECT_GE(waited, absl::Milliseconds(140));
  EXPECT_LT(waited, absl::Seconds(10));
  // The deadline covers the whole frame: a length and part of a payload, then silence.
  ASSERT_EQ(write(p.a(), "\x05\x00\x00\x00" "ab", 6), 6);
  start = absl::Now();
  s = ReadFrame(p.b(), 150).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
}

TEST(WorkerProtocol, FramesOverTheLimitAreRefused) {
  SocketPair p;
  // Writing: refused before anything is sent, so the stream stays in step.
  const absl::Status w = WriteFrame(p.a(), std::string(kMaxFrameBytes + 1, 'x'));
  EXPECT_EQ(w.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.message(), "frame too large");
  ASSERT_TRUE(WriteFrame(p.a(), "next").ok());
  auto next = ReadFrame(p.b(), 5000);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, "next");
  // Reading: a length over the limit is refused without allocating or reading it.
  const uint32_t n = kMaxFrameBytes + 1;
  const unsigned char len[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                static_cast<unsigned char>(n >> 16),
                                static_cast<unsigned char>(n >> 24)};
  ASSERT_EQ(write(p.a(), len, 4), 4);
  const absl::Status r = ReadFrame(p.b(), 5000).status();
  EXPECT_EQ(r.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(r.message(), "frame too large");
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(p.a(), huge, 4), 4);
  EXPECT_EQ(ReadFrame(p.b(), 5000).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace looptool
