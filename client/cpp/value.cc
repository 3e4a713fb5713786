#include "client/cpp/value.h"

namespace looptool::client {

absl::StatusOr<Value> FromEvent(const compiler_gym::Event& e) {
  Value v;
  switch (e.value_case()) {
    case compiler_gym::Event::kStringValue:
      v.text = e.string_value();
      return v;
    case compiler_gym::Event::kAnyValue: {
      compiler_gym::Opaque opaque;
      if (!e.any_value().UnpackTo(&opaque)) break;
      v.kind = Value::Kind::kGraphJson;
      v.text = opaque.data();
      return v;
    }
    case compiler_gym::Event::kFloatTensor:
      v.kind = Value::Kind::kFloats;
      v.floats.assign(e.float_tensor().value().begin(), e.float_tensor().value().end());
      v.shape.assign(e.float_tensor().shape().begin(), e.float_tensor().shape().end());
      return v;
    case compiler_gym::Event::kBooleanTensor:
      v.kind = Value::Kind::kBools;
      v.bools.assign(e.boolean_tensor().value().begin(), e.boolean_tensor().value().end());
      v.shape.assign(e.boolean_tensor().shape().begin(), e.boolean_tensor().shape().end());
      return v;
    case compiler_gym::Event::kInt64Tensor:
      v.kind = Value::Kind::kInt64s;
      v.integers.assign(e.int64_tensor().value().begin(), e.int64_tensor().value().end());
      v.shape.assign(e.int64_tensor().shape().begin(), e.int64_tensor().shape().end());
      return v;
    case compiler_gym::Event::kByteTensor:
      v.kind = Value::Kind::kBytes;
      v.text = e.byte_tensor().value();
      v.shape.assign(e.byte_tensor().shape().begin(), e.byte_tensor().shape().end());
      return v;
    case compiler_gym::Event::kDoubleValue:
      v.kind = Value::Kind::kDouble;
      v.number = e.double_value();
      return v;
    case compiler_gym::Event::kInt64Value:
      v.kind = Value::Kind::kInt64;
      v.integer = e.int64_value();
      return v;
    default:
      break;
  }
  return absl::InvalidArgumentError("the server sent an observation of an unexpected kind");
}

}  // namespace looptool::client
