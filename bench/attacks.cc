#include "bench/attacks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace looptool::bench {

namespace cg = compiler_gym;

std::unique_ptr<cg::CompilerGymService::Stub> NewClientStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  return cg::CompilerGymService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> CallContext(double seconds, const std::string& client_id) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
  if (!client_id.empty()) ctx->AddMetadata("looptool-client-id", client_id);
  return ctx;
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

namespace {

// Counts of (what, status code) and of plain events, for Tally().
class Counts {
 public:
  void Add(const std::string& what, grpc::StatusCode code) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_[what][CodeName(code)];
  }
  void Add(const std::string& what, int64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    events_[what] += n;
  }
  std::string ToString() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> parts;
    for (const auto& [what, codes] : calls_) {
      int64_t total = 0;
      std::vector<std::string> by_code;
      for (const auto& [code, n] : codes) {
        total += n;
        by_code.push_back(absl::StrCat(n, " ", code));
      }
      parts.push_back(absl::StrCat(total, " ", what, " (", absl::StrJoin(by_code, ", "), ")"));
    }
    for (const auto& [what, n] : events_) parts.push_back(absl::StrCat(n, " ", what));
    return absl::StrJoin(parts, "; ");
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, int64_t>> calls_;
  std::map<std::string, int64_t> events_;
};

// Threads that run until Stop().
class ThreadedAttack : public Attack {
 public:
  void Stop() override {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  std::string Tally() const override { return counts_.ToString(); }

 protected:
  template <typename F>
  void Spawn(F f) {
    threads_.emplace_back(std::move(f));
  }
  bool stopping() const { return stop_.load(); }
  Counts counts_;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

constexpr double kDeadline = 10;  // seconds, every attacker call
constexpr char kSmallMatmul[] = "benchmark://mm64_256_16_range-v0/mm64_64_64";

int64_t StartOn(cg::CompilerGymService::Stub& stub, const std::string& uri, Counts& counts) {
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri(uri);
  cg::StartSessionReply reply;
  const grpc::Status s = stub.StartSession(CallContext(kDeadline).get(), r, &reply);
  counts.Add("StartSession", s.error_code());
  return s.ok() ? reply.session_id() : 0;
}

// ---------------------------------------------------------------------------------------------

class SessionHogAttack : public ThreadedAttack {
 public:
  SessionHogAttack(std::string address, int connections)
      : address_(std::move(address)), connections_(connections) {}
  std::string name() const override { return "session_hog"; }
  std::string description() const override {
    return absl::StrCat(connections_,
                        " connections each fork until refused, keep every session alive with "
                        "empty Steps, fork again; no session is ever ended");
  }
  void Start() override {
    for (int i = 0; i < connections_; ++i) Spawn([this, i] { Run(i); });
  }

 private:
  void Run(int i) {
    auto stub = NewClientStub(address_);
    std::mt19937_64 rng(i);
    std::vector<int64_t> held;
    while (!stopping()) {
      if (held.empty()) {
        if (const int64_t id = StartOn(*stub, kSmallMatmul, counts_)) held.push_back(id);
        continue;
      }
      const size_t parent = rng() % held.size();
      cg::ForkSessionRequest f;
      f.set_session_id(held[parent]);
      cg::ForkSessionReply fr;
      const grpc::Status s = stub->ForkSession(CallContext(kDeadline).get(), f, &fr);
      counts_.Add("ForkSession", s.error_code());
      if (s.ok()) {
        held.push_back(fr.session_id());
        continue;
      }
      if (s.error_code() == grpc::StatusCode::NOT_FOUND) {  // evicted or reaped
        held.erase(held.begin() + static_cast<long>(parent));
        continue;
      }
      // Refused: keep some of what it holds alive, then try again.
      for (int k = 0; k < 16 && !held.empty() && !stopping(); ++k) {
        const size_t j = rng() % held.size();
        cg::StepRequest step;
        step.set_session_id(held[j]);
        cg::StepReply reply;
        const grpc::Status t = stub->Step(CallContext(kDeadline).get(), step, &reply);
        counts_.Add("empty Step", t.error_code());
        if (t.error_code() == grpc::StatusCode::NOT_FOUND) {
          held.erase(held.begin() + static_cast<long>(j));
        }
      }
    }
  }

  const std::string address_;
  const int connections_;
};

// ---------------------------------------------------------------------------------------------
// Raw sockets.

bool ParseAddress(const std::string& address, sockaddr_in* out) {
  const std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) return false;
  *out = {};
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, parts[0].c_str(), &out->sin_addr) == 1;
}

// A connected TCP socket with 1 s send and receive timeouts, or -1.
int Connect(const sockaddr_in& to) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads whatever is waiting without blocking; false when the peer closed or failed.
bool Drain(int fd) {
  char buf[16384];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) f.push_back(static_cast<char>(stream >> shift));
  return f + payload;
}

// HPACK (RFC 7541) for a gRPC request's headers: indexed :method POST and :scheme http, the
// rest literals without indexing (no Huffman coding); every string under 127 bytes.
std::string RequestHeaders(const std::string& authority) {
  const auto literal = [](const std::string& s) { return std::string(1, char(s.size())) + s; };
  std::string h;
  h += '\x83';                                                   // :method: POST
  h += '\x86';                                                   // :scheme: http
  h += '\x04' + literal("/compiler_gym.CompilerGymService/Step");  // :path (static 4)
  h += '\x01' + literal(authority);                              // :authority (static 1)
  h += std::string("\x0f\x10", 2) + literal("application/grpc");  // content-type (static 31)
  h += '\x00' + literal("te") + literal("trailers");
  return h;
}

std::string ConnectionStart() {
  return kPreface + Frame(0x4, 0, 0, "");  // an empty SETTINGS frame
}

// Reads frames until the server's SETTINGS (not an acknowledgement), then acknowledges it, as
// RFC 9113 (6.5.3) requires; its limits (streams per connection) then bind this connection.
bool AcknowledgeSettings(int fd) {
  for (int frames = 0; frames < 16; ++frames) {
    unsigned char h[9];
    if (recv(fd, h, sizeof(h), MSG_WAITALL) != static_cast<ssize_t>(sizeof(h))) return false;
    const size_t length = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
    std::string payload(length, '\0');
    if (length > 0 && recv(fd, payload.data(), length, MSG_WAITALL) !=
                          static_cast<ssize_t>(length)) {
      return false;
    }
    if (h[3] == 0x4 && (h[4] & 0x1) == 0) return SendAll(fd, Frame(0x4, 0x1, 0, ""));
  }
  return false;
}

class StreamFloodAttack : public ThreadedAttack {
 public:
  StreamFloodAttack(std::string address, int connections, int streams, bool acknowledge)
      : address_(std::move(address)),
        connections_(connections),
        streams_(streams),
        acknowledge_(acknowledge) {}
  std::string name() const override {
    return acknowledge_ ? "stream_flood" : "stream_flood_unacknowledged";
  }
  std::string description() const override {
    return absl::StrCat(connections_, " raw TCP connections each opening ", streams_,
                        " HTTP/2 streams of headers and no body (no token), reopened when closed",
                        acknowledge_ ? "; each acknowledges the server's SETTINGS"
                                     : "; none acknowledges the server's SETTINGS (not HTTP/2)");
  }
  void Start() override {
    Spawn([this] { Run(); });
  }

 private:
  struct Conn {
    int fd = -1;
    int opened = 0;  // streams
  };

  void Run() {
    sockaddr_in to;
    if (!ParseAddress(address_, &to)) {
      counts_.Add("bad address");
      return;
    }
    const std::string headers = RequestHeaders(address_);
    std::vector<Conn> conns(static_cast<size_t>(connections_));
    while (!stopping()) {
      for (Conn& c : conns) {
        if (c.fd < 0) {
          c.fd = Connect(to);
          c.opened = 0;
          if (c.fd < 0 || !SendAll(c.fd, ConnectionStart()) ||
              (acknowledge_ && !AcknowledgeSettings(c.fd))) {
            counts_.Add("connections refused");
            if (c.fd >= 0) close(c.fd);
            c.fd = -1;
            continue;
          }
          counts_.Add("connections opened");
        }
        if (c.opened < streams_) {
          std::string batch;
          int k = 0;
          for (; k < 100 && c.opened < streams_; ++k, ++c.opened) {
            batch += Frame(0x1, 0x4, static_cast<uint32_t>(2 * c.opened + 1), headers);
          }
          if (!SendAll(c.fd, batch)) {
            counts_.Add("connections cut while sending");
            close(c.fd);
            c.fd = -1;
            continue;
          }
          counts_.Add("streams opened", k);
        }
        if (!Drain(c.fd)) {
          counts_.Add("connections closed by the server");
          close(c.fd);
          c.fd = -1;
        }
      }
      std::vector<pollfd> fds;
      for (const Conn& c : conns) {
        if (c.fd >= 0 && c.opened >= streams_) fds.push_back({c.fd, POLLIN, 0});
      }
      if (fds.size() == conns.size()) poll(fds.data(), fds.size(), 100);  // all sent: wait
    }
    for (Conn& c : conns) {
      if (c.fd >= 0) close(c.fd);
    }
  }

  const std::string address_;
  const int connections_, streams_;
  const bool acknowledge_;
};

class IdleConnectionsAttack : public ThreadedAttack {
 public:
  IdleConnectionsAttack(std::string address, int silent, int preface)
      : address_(std::move(address)), silent_(silent), preface_(preface) {}
  std::string name() const override { return "idle_connections"; }
  std::string description() const override {
    return absl::StrCat(silent_, " TCP connections that send nothing and ", preface_,
                        " that send only HTTP/2's preface, reopened when closed");
  }
  void Start() override {
    Spawn([this] { Run(); });
  }

 private:
  void Run() {
    sockaddr_in to;
    if (!ParseAddress(address_, &to)) {
      counts_.Add("bad address");
      return;
    }
    std::vector<int> fds(static_cast<size_t>(silent_ + preface_), -1);
    while (!stopping()) {
      for (size_t i = 0; i < fds.size() && !stopping(); ++i) {
        if (fds[i] >= 0) continue;
        fds[i] = Connect(to);
        if (fds[i] < 0) {
          counts_.Add("connections refused");
          continue;
        }
        if (static_cast<int>(i) >= silent_ && !SendAll(fds[i], kPreface)) {
          close(fds[i]);
          fds[i] = -1;
          continue;
        }
        counts_.Add("connections opened");
      }
      std::vector<pollfd> polled;
      for (int fd : fds) {
        if (fd >= 0) polled.push_back({fd, POLLIN, 0});
      }
      poll(polled.data(), polled.size(), 200);
      for (const pollfd& p : polled) {
        if (p.revents == 0 || Drain(p.fd)) continue;
        counts_.Add("connections closed by the server");
        close(p.fd);
        for (int& fd : fds) {
          if (fd == p.fd) fd = -1;
        }
      }
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }

  const std::string address_;
  const int silent_, preface_;
};

// ---------------------------------------------------------------------------------------------

constexpr char kSlowKernel[] = "benchmark://conv2d-v0/resnet18_conv2_3x3";

class SlowKernelsAttack : public ThreadedAttack {
 public:
  SlowKernelsAttack(std::string address, ServerSpaces spaces, int sessions, int busy_steps)
      : address_(std::move(address)),
        spaces_(std::move(spaces)),
        sessions_(sessions),
        busy_steps_(busy_steps) {}
  std::string name() const override { return "slow_kernels"; }
  std::string description() const override {
    return absl::StrCat("one connection: ", sessions_, " sessions of ", kSlowKernel,
                        " each timing a new schedule (a random action, then flops) in a loop, "
                        "and ", busy_steps_, " threads stepping one of them while it times");
  }
  void Start() override {
    stub_ = NewClientStub(address_);
    busy_ = StartOn(*stub_, kSlowKernel, counts_);
    for (int i = 0; i < sessions_; ++i) Spawn([this, i] { Timing(i); });
    if (busy_ == 0) return;  // no busy session to step (its StartSession is tallied)
    for (int i = 0; i < busy_steps_; ++i) Spawn([this] { Busy(); });
  }

 private:
  void Timing(int i) {
    std::mt19937_64 rng(1000 + i);
    int64_t id = i == 0 ? busy_ : 0;
    while (!stopping()) {
      if (id == 0) {
        id = StartOn(*stub_, kSlowKernel, counts_);
        continue;
      }
      cg::StepRequest r;
      r.set_session_id(id);
      r.add_action()->set_int64_value(
          static_cast<int64_t>(rng() % static_cast<uint64_t>(spaces_.action_space_sizes[0])));
      r.add_observation_space(spaces_.flops);
      cg::StepReply reply;
      const grpc::Status s = stub_->Step(CallContext(60).get(), r, &reply);
      counts_.Add("timed Step", s.error_code());
      if (s.error_code() == grpc::StatusCode::NOT_FOUND) id = 0;
    }
  }
  void Busy() {
    while (!stopping()) {
      cg::StepRequest r;
      r.set_session_id(busy_);
      r.add_observation_space(spaces_.loops_tensor);
      cg::StepReply reply;
      const grpc::Status s = stub_->Step(CallContext(kDeadline).get(), r, &reply);
      counts_.Add("Step on the busy session", s.error_code());
    }
  }

  const std::string address_;
  const ServerSpaces spaces_;
  const int sessions_, busy_steps_;
  std::unique_ptr<cg::CompilerGymService::Stub> stub_;
  int64_t busy_ = 0;
};

class IdentityChurnAttack : public ThreadedAttack {
 public:
  IdentityChurnAttack(std::string address, int threads)
      : address_(std::move(address)), threads_(threads) {}
  std::string name() const override { return "identity_churn"; }
  std::string description() const override {
    return absl::StrCat(threads_, " threads adding a tiny benchmark each under a new "
                                  "looptool-client-id");
  }
  void Start() override {
    for (int i = 0; i < threads_; ++i) Spawn([this, i] { Run(i); });
  }

 private:
  void Run(int i) {
    auto stub = NewClientStub(address_);
    for (int64_t n = 0; !stopping(); ++n) {
      cg::AddBenchmarkRequest r;
      cg::Benchmark* b = r.add_benchmark();
      b->set_uri(absl::StrCat("benchmark://churn-v0/p", n));
      b->mutable_program()->set_contents(absl::StrCat("O[r] += I[r,c]; r=4 c=", 1 + n % 64));
      cg::AddBenchmarkReply reply;
      const grpc::Status s = stub->AddBenchmark(
          CallContext(kDeadline, absl::StrCat("churn-", i, "-", n)).get(), r, &reply);
      counts_.Add("AddBenchmark", s.error_code());
    }
  }

  const std::string address_;
  const int threads_;
};

class TogetherAttack : public Attack {
 public:
  explicit TogetherAttack(std::vector<std::unique_ptr<Attack>> attacks)
      : attacks_(std::move(attacks)) {}
  std::string name() const override { return "all_at_once"; }
  std::string description() const override {
    std::vector<std::string> names;
    for (const auto& a : attacks_) names.push_back(a->name());
    return absl::StrCat("all of: ", absl::StrJoin(names, ", "));
  }
  void Start() override {
    for (auto& a : attacks_) a->Start();
  }
  void Stop() override {
    for (auto& a : attacks_) a->Stop();
  }
  std::string Tally() const override {
    std::vector<std::string> parts;
    for (const auto& a : attacks_) parts.push_back(absl::StrCat(a->name(), ": ", a->Tally()));
    return absl::StrJoin(parts, "; ");
  }

 private:
  std::vector<std::unique_ptr<Attack>> attacks_;
};

}  // namespace

std::unique_ptr<Attack> SessionHog(const std::string& address, int connections) {
  return std::make_unique<SessionHogAttack>(address, connections);
}
std::unique_ptr<Attack> StreamFlood(const std::string& address, int connections, int streams,
                                    bool acknowledge_settings) {
  return std::make_unique<StreamFloodAttack>(address, connections, streams,
                                             acknowledge_settings);
}
std::unique_ptr<Attack> IdleConnections(const std::string& address, int silent, int preface) {
  return std::make_unique<IdleConnectionsAttack>(address, silent, preface);
}
std::unique_ptr<Attack> SlowKernels(const std::string& address, const ServerSpaces& spaces,
                                    int sessions, int busy_steps) {
  return std::make_unique<SlowKernelsAttack>(address, spaces, sessions, busy_steps);
}
std::unique_ptr<Attack> IdentityChurn(const std::string& address, int threads) {
  return std::make_unique<IdentityChurnAttack>(address, threads);
}
std::unique_ptr<Attack> Together(std::vector<std::unique_ptr<Attack>> attacks) {
  return std::make_unique<TogetherAttack>(std::move(attacks));
}

}  // namespace looptool::bench
