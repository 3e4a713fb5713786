#include "service/proto_convert.h"

#include <cmath>

namespace looptool::service {
namespace {

// A FloatBox or Int64Box of the space's shape, every element bounded by [low, high].
template <typename T, typename Box>
void FillBox(const ObservationSpace& s, Box& box) {
  int64_t n = 1;
  for (int64_t d : s.shape) {
    box.mutable_low()->add_shape(static_cast<uint64_t>(d));
    box.mutable_high()->add_shape(static_cast<uint64_t>(d));
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) {
    box.mutable_low()->add_value(static_cast<T>(s.low));
    box.mutable_high()->add_value(static_cast<T>(s.high));
  }
}

}  // namespace

compiler_gym::Event ToEvent(const Observation& o) {
  compiler_gym::Event e;
  switch (o.kind) {
    case Observation::Kind::kString:
      e.set_string_value(o.text);
      break;
    case Observation::Kind::kGraphJson: {
      compiler_gym::Opaque opaque;
      opaque.set_format(kGraphFormat);
      opaque.set_data(o.text);
      e.mutable_any_value()->PackFrom(opaque);
      break;
    }
    case Observation::Kind::kFloatTensor: {
      compiler_gym::FloatTensor* t = e.mutable_float_tensor();
      for (int64_t d : o.shape) t->add_shape(static_cast<uint64_t>(d));
      t->mutable_value()->Add(o.floats.begin(), o.floats.end());
      break;
    }
    case Observation::Kind::kBoolTensor: {
      compiler_gym::BooleanTensor* t = e.mutable_boolean_tensor();
      for (int64_t d : o.shape) t->add_shape(static_cast<uint64_t>(d));
      for (bool b : o.bools) t->add_value(b);
      break;
    }
    case Observation::Kind::kDouble:
      e.set_double_value(o.number);
      break;
    case Observation::Kind::kInt64:
      e.set_int64_value(o.integer);
      break;
    case Observation::Kind::kInt64Tensor: {
      compiler_gym::Int64Tensor* t = e.mutable_int64_tensor();
      for (int64_t d : o.shape) t->add_shape(static_cast<uint64_t>(d));
      t->mutable_value()->Add(o.integers.begin(), o.integers.end());
      break;
    }
    case Observation::Kind::kBytes: {
      compiler_gym::ByteTensor* t = e.mutable_byte_tensor();
      t->add_shape(o.text.size());
      t->set_value(o.text);
      break;
    }
  }
  return e;
}

compiler_gym::ObservationSpace ToProto(const ObservationSpace& s) {
  compiler_gym::ObservationSpace out;
  out.set_name(s.name);
  out.set_deterministic(s.deterministic);
  out.set_platform_dependent(s.platform_dependent);
  *out.mutable_default_observation() = ToEvent(s.default_value);
  compiler_gym::Space* space = out.mutable_space();
  switch (s.kind) {
    case Observation::Kind::kString:
    case Observation::Kind::kGraphJson:
      space->mutable_string_value()->mutable_length_range()->set_min(0);
      break;
    case Observation::Kind::kFloatTensor:
      FillBox<float>(s, *space->mutable_float_box());
      break;
    case Observation::Kind::kBoolTensor: {
      compiler_gym::BooleanSequenceSpace* seq = space->mutable_boolean_sequence();
      seq->mutable_length_range()->set_min(s.min_length);
      seq->mutable_length_range()->set_max(s.max_length);
      seq->mutable_scalar_range()->set_min(false);
      seq->mutable_scalar_range()->set_max(true);
      break;
    }
    case Observation::Kind::kDouble: {
      compiler_gym::DoubleRange* r = space->mutable_double_value();
      r->set_min(s.low);
      if (std::isfinite(s.high)) r->set_max(s.high);  // unset max: unbounded
      break;
    }
    case Observation::Kind::kInt64: {
      compiler_gym::Int64Range* r = space->mutable_int64_value();
      r->set_min(static_cast<int64_t>(s.low));
      r->set_max(static_cast<int64_t>(s.high));
      break;
    }
    case Observation::Kind::kInt64Tensor:
      FillBox<int64_t>(s, *space->mutable_int64_box());
      break;
    case Observation::Kind::kBytes: {
      compiler_gym::ByteSequenceSpace* seq = space->mutable_byte_sequence();
      seq->mutable_length_range()->set_min(s.min_length);
      seq->mutable_length_range()->set_max(s.max_length);
      break;
    }
  }
  return out;
}

compiler_gym::ActionSpace ToProto(const ActionSpace& space) {
  return ToProto(space.name, space.Names());
}

compiler_gym::ActionSpace ToProto(const std::string& name, const std::vector<std::string>& names) {
  compiler_gym::ActionSpace out;
  out.set_name(name);
  for (const std::string& n : names) out.mutable_space()->mutable_named_discrete()->add_name(n);
  return out;
}

}  // namespace looptool::service
