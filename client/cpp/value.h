// Value: one observation as a client sees it, typed by what the server sent: text, a graph
// (networkx node-link JSON), a float, bool or int64 tensor with its shape, bytes (machine code),
// or a number. Every
// kind of Event a LoopTool server sends decodes (tests/client/conformance_test.cc checks each
// observation space GetSpaces declares).
#ifndef LOOPTOOL_CLIENT_CPP_VALUE_H_
#define LOOPTOOL_CLIENT_CPP_VALUE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/compiler_gym_service.pb.h"

namespace looptool::client {

struct Value {
  enum class Kind { kString, kGraphJson, kFloats, kBools, kDouble, kInt64, kInt64s, kBytes };
  Kind kind = Kind::kString;
  std::string text;             // kString, kGraphJson, kBytes
  std::vector<float> floats;    // kFloats
  std::vector<bool> bools;      // kBools
  std::vector<int64_t> integers;  // kInt64s
  std::vector<int64_t> shape;   // kFloats, kBools, kInt64s, kBytes
  double number = 0;            // kDouble
  int64_t integer = 0;          // kInt64
};

// INVALID_ARGUMENT for an Event of a kind LoopTool never sends.
absl::StatusOr<Value> FromEvent(const compiler_gym::Event& event);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_VALUE_H_
