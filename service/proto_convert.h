// Conversions between the engine's plain values (observations, spaces, action spaces) and
// CompilerGym's wire messages. Graph observations travel as Event.any_value holding
// compiler_gym.Opaque{format="json://networkx/MultiDiGraph"}; their space is a StringSpace, as
// CompilerGym's own ProgramL graphs are declared.
#ifndef LOOPTOOL_SERVICE_PROTO_CONVERT_H_
#define LOOPTOOL_SERVICE_PROTO_CONVERT_H_

#include "backend/actions/action_space.h"
#include "backend/env/observation.h"
#include "proto/compiler_gym_service.pb.h"

namespace looptool::service {

inline constexpr char kGraphFormat[] = "json://networkx/MultiDiGraph";

compiler_gym::Event ToEvent(const Observation& observation);
compiler_gym::ObservationSpace ToProto(const ObservationSpace& space);
// A named_discrete space listing the actions' names in index order.
compiler_gym::ActionSpace ToProto(const ActionSpace& space);
compiler_gym::ActionSpace ToProto(const std::string& name, const std::vector<std::string>& names);

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_PROTO_CONVERT_H_
