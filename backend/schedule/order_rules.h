// The rules one loop order of a statement must keep (rules 1-3 of LoopTree::Create): internal
// to backend/schedule, where LoopTree::Create applies them to every nest it builds.
#ifndef LOOPTOOL_BACKEND_SCHEDULE_ORDER_RULES_H_
#define LOOPTOOL_BACKEND_SCHEDULE_ORDER_RULES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backend/ir/program.h"
#include "backend/schedule/loop.h"

namespace looptool::schedule_internal {

// OK where `order` keeps rules 1-3 of LoopTree::Create over `vars` (the variables it must loop
// over, each in range of `program`); else INVALID_ARGUMENT naming the first rule broken, each
// message starting with `where` ("the compute nest of statement 2").
absl::Status CheckOrder(const Program& program, const LoopOrder& order,
                        const std::vector<int>& vars, const std::string& where);

// Whether CheckOrder(program, order, vars, ...) is OK, in one pass over `order` and without
// building a message or a set: the check of every nest an action builds (an action mask builds
// hundreds). Callers call CheckOrder where it is false, for the message.
bool OrderHolds(const Program& program, const LoopOrder& order, const std::vector<int>& vars);

}  // namespace looptool::schedule_internal

#endif  // LOOPTOOL_BACKEND_SCHEDULE_ORDER_RULES_H_
