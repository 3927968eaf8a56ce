// atp/errno_status.h: the status of a failed system call, keeping its errno.
//
// absl::ErrnoToStatusCode folds many errnos into one code (EADDRNOTAVAIL, a
// bind to an address this host does not have, becomes kAlreadyExists), so
// the code alone cannot say what the OS said. ErrnoStatus keeps the errno
// as a payload: ErrnoOf gives it back, and the Python bindings raise
// OSError(errno, message) for such a status (python/src/status.cc).
//
//   if (::bind(fd, ...) != 0) return atp::ErrnoStatus(errno, "bind(10.0.0.1:4000)");
//   ...
//   if (std::optional<int> error = atp::ErrnoOf(status); error && *error == EADDRINUSE) ...
#ifndef ATP_ERRNO_STATUS_H_
#define ATP_ERRNO_STATUS_H_

#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace atp {

// kErrnoPayloadUrl: the payload's type URL; its value is the errno in decimal.
inline constexpr char kErrnoPayloadUrl[] = "type.libatp/errno";

// ErrnoStatus: code absl::ErrnoToStatusCode(error), message
// "<what>: <strerror(error)>", and `error` as the payload.
inline absl::Status ErrnoStatus(int error, std::string_view what) {
  absl::Status status(absl::ErrnoToStatusCode(error),
                      std::string(what) + ": " + std::strerror(error));
  status.SetPayload(kErrnoPayloadUrl, absl::Cord(std::to_string(error)));
  return status;
}

// ErrnoOf: the errno an ErrnoStatus keeps; nullopt for any other status.
inline std::optional<int> ErrnoOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kErrnoPayloadUrl);
  int error = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &error)) {
    return std::nullopt;
  }
  return error;
}

}  // namespace atp

#endif  // ATP_ERRNO_STATUS_H_
