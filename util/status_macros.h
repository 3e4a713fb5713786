// RETURN_IF_ERROR and ASSIGN_OR_RETURN for absl::Status / absl::StatusOr (Abseil 20220623 has none).
#ifndef LOOPTOOL_UTIL_STATUS_MACROS_H_
#define LOOPTOOL_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LT_STATUS_CONCAT_INNER_(a, b) a##b
#define LT_STATUS_CONCAT_(a, b) LT_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    const ::absl::Status lt_status_ = (expr);      \
    if (!lt_status_.ok()) return lt_status_;       \
  } while (false)

// `ASSIGN_OR_RETURN(T x, StatusOrExpr());` declares/assigns `x` from the value of a StatusOr, or
// returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  LT_ASSIGN_OR_RETURN_IMPL_(LT_STATUS_CONCAT_(lt_statusor_, __LINE__), lhs, expr)

#define LT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()

#endif  // LOOPTOOL_UTIL_STATUS_MACROS_H_
