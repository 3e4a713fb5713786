// unroll and vectorize: toggle code-generation marks on the cursor loop; stream and fold, on its
// statement.
#include "backend/actions/primitives.h"

namespace looptool::actions_internal {
namespace {

// After the compute nest's marks changed, the loops the write nest shares change with them;
// the write nest keeps at most one vectorize mark.
void SyncSharedWriteLoops(const LoopTree& tree, StatementSchedule& sched, int stmt) {
  const int shared = tree.SharedDepth(stmt);
  bool shared_vectorized = false;
  for (int i = 0; i < shared; ++i) {
    sched.write[i] = sched.compute[i];
    shared_vectorized |= sched.write[i].vectorize;
  }
  if (shared_vectorized) {
    for (int i = shared; i < static_cast<int>(sched.write.size()); ++i) {
      sched.write[i].vectorize = false;
    }
  }
}

}  // namespace

NoEffectReason CheckVectorize(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  return InnerExtent(tree.schedule(c.statement).compute, c.depth) != 1
             ? NoEffectReason::kNotInnermostOfVariable
             : NoEffectReason::kNone;
}

LoopTree DoUnroll(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  StatementSchedule& sched = schedules[c.statement];
  sched.compute[c.depth].unroll = !sched.compute[c.depth].unroll;
  SyncSharedWriteLoops(tree, sched, c.statement);
  return Rebuild(tree, std::move(schedules), c);
}

LoopTree DoVectorize(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  StatementSchedule& sched = schedules[c.statement];
  const bool set = !sched.compute[c.depth].vectorize;
  for (Loop& l : sched.compute) l.vectorize = false;
  sched.compute[c.depth].vectorize = set;
  SyncSharedWriteLoops(tree, sched, c.statement);
  return Rebuild(tree, std::move(schedules), c);
}

NoEffectReason CheckStreamOf(const Program& program, int statement) {
  return program.statement(statement).reduction != Reduction::kAssign
             ? NoEffectReason::kNotAssignment
             : NoEffectReason::kNone;
}

NoEffectReason CheckStream(const LoopTree& tree) {
  return CheckStreamOf(tree.program(), tree.cursor().statement);
}

LoopTree DoStream(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  schedules[c.statement].stream = !schedules[c.statement].stream;
  return Rebuild(tree, std::move(schedules), c);
}

NoEffectReason CheckFold(const LoopTree& tree) {
  return CanFoldRows(tree.program(), tree.cursor().statement) ? NoEffectReason::kNone
                                                              : NoEffectReason::kNotStrideTwoWindow;
}

LoopTree DoFold(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  schedules[c.statement].fold = !schedules[c.statement].fold;
  return Rebuild(tree, std::move(schedules), c);
}

}  // namespace looptool::actions_internal
