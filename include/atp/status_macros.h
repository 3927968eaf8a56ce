// atp/status_macros.h: early-return helpers for absl::Status / absl::StatusOr.
//
// Abseil 20220623 (Debian 12) ships no status macros, so libatp defines its
// own, once, here.
//
//   absl::Status Open() {
//     ATP_RETURN_IF_ERROR(CheckPermissions());
//     ATP_ASSIGN_OR_RETURN(Port port, FindPort(name));
//     ...
//   }
#ifndef ATP_STATUS_MACROS_H_
#define ATP_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ATP_RETURN_IF_ERROR(expr)                          \
  do {                                                     \
    ::absl::Status atp_status_ = (expr);                   \
    if (!atp_status_.ok()) return atp_status_;             \
  } while (0)

#define ATP_STATUS_CONCAT_INNER_(a, b) a##b
#define ATP_STATUS_CONCAT_(a, b) ATP_STATUS_CONCAT_INNER_(a, b)

#define ATP_ASSIGN_OR_RETURN(lhs, expr) \
  ATP_ASSIGN_OR_RETURN_IMPL_(ATP_STATUS_CONCAT_(atp_statusor_, __LINE__), lhs, expr)

#define ATP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // ATP_STATUS_MACROS_H_
