// Observation and ObservationSpace: what an environment can report about its state, as plain
// values (no protobuf); the service converts them to CompilerGym Events and Spaces.
#ifndef LOOPTOOL_BACKEND_ENV_OBSERVATION_H_
#define LOOPTOOL_BACKEND_ENV_OBSERVATION_H_

#include <cstdint>
#include <string>
#include <vector>

namespace looptool {

struct Observation {
  enum class Kind {
    kString,       // text
    kGraphJson,    // text: networkx node-link JSON of a MultiDiGraph
    kFloatTensor,  // floats with shape
    kBoolTensor,   // bools with shape
    kDouble,       // number
    kInt64,        // integer
    kInt64Tensor,  // integers with shape
    kBytes,        // bytes (in `text`): machine code
  };
  Kind kind = Kind::kString;
  std::string text;
  std::vector<float> floats;
  std::vector<bool> bools;
  std::vector<int64_t> integers;
  std::vector<int64_t> shape;
  double number = 0;
  int64_t integer = 0;

  static Observation String(std::string s) { return {Kind::kString, std::move(s)}; }
  static Observation Graph(std::string json) { return {Kind::kGraphJson, std::move(json)}; }
  static Observation Bytes(std::string bytes) { return {Kind::kBytes, std::move(bytes)}; }
  static Observation Floats(std::vector<float> v, std::vector<int64_t> shape) {
    Observation o{Kind::kFloatTensor};
    o.floats = std::move(v);
    o.shape = std::move(shape);
    return o;
  }
  static Observation Bools(std::vector<bool> v) {
    Observation o{Kind::kBoolTensor};
    o.shape = {static_cast<int64_t>(v.size())};
    o.bools = std::move(v);
    return o;
  }
  static Observation Int64s(std::vector<int64_t> v, std::vector<int64_t> shape) {
    Observation o{Kind::kInt64Tensor};
    o.integers = std::move(v);
    o.shape = std::move(shape);
    return o;
  }
  static Observation Double(double d) {
    Observation o{Kind::kDouble};
    o.number = d;
    return o;
  }
  static Observation Int64(int64_t i) {
    Observation o{Kind::kInt64};
    o.integer = i;
    return o;
  }
};

// How a space is declared to clients. Tensors have a fixed `shape` and elementwise bounds;
// kBoolTensor and kBytes spaces are sequences whose length lies in [min_length, max_length].
struct ObservationSpace {
  std::string name;
  Observation::Kind kind = Observation::Kind::kString;
  std::vector<int64_t> shape;
  double low = 0, high = 0;  // bounds of numbers and tensor elements
  int64_t min_length = 0, max_length = 0;
  bool deterministic = true;
  bool platform_dependent = false;
  Observation default_value;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_OBSERVATION_H_
