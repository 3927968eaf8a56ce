// lib/collectives/gloo_status.h: gloo reports errors by throwing; libatp's
// API returns absl::Status. These turn one into the other at the edge.
#ifndef ATP_LIB_COLLECTIVES_GLOO_STATUS_H_
#define ATP_LIB_COLLECTIVES_GLOO_STATUS_H_

#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gloo/common/error.h"

namespace atp::collectives {

inline std::chrono::milliseconds ToMilliseconds(absl::Duration duration) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(duration));
}

// GlooError: an I/O error (a peer gone, a timeout) is Unavailable, any other
// gloo or standard exception Internal; the message names `what` was running.
inline absl::Status GlooError(std::string_view what, const std::exception& e) {
  const std::string message = absl::StrCat(std::string(what), ": ", e.what());
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

}  // namespace atp::collectives

#endif  // ATP_LIB_COLLECTIVES_GLOO_STATUS_H_
