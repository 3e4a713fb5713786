// HTTP/2 written by hand for tests (RFC 9113, 7541): the client's preface, a frame, and a gRPC
// Step call's request headers; for clients that break the protocol on purpose.
#ifndef LOOPTOOL_TESTS_SERVICE_HTTP2_FRAMES_H_
#define LOOPTOOL_TESTS_SERVICE_HTTP2_FRAMES_H_

#include <cstdint>
#include <string>

namespace looptool::testing {

inline const std::string kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types and flags (RFC 9113, 6).
constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4,
                  kContinuation = 0x9;
constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

inline std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                         const std::string& payload = "") {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int shift : {16, 8, 0}) f.push_back(static_cast<char>(n >> shift));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>(stream >> shift));
  return f + payload;
}

// HPACK: indexed :method POST and :scheme http, the rest literals without indexing or Huffman
// coding.
inline std::string StepRequestHeaders(const std::string& authority) {
  const auto literal = [](const std::string& s) { return std::string(1, char(s.size())) + s; };
  return std::string("\x83\x86") + '\x04' + literal("/compiler_gym.CompilerGymService/Step") +
         '\x01' + literal(authority) + std::string("\x0f\x10", 2) +
         literal("application/grpc") + '\x00' + literal("te") + literal("trailers");
}

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_SERVICE_HTTP2_FRAMES_H_
