// python/src/status.h: absl::Status -> Python exceptions, and the
// conversions every binding file shares.
//
// InvalidArgument -> ValueError (the message starts with the offending
// field's path, as Validate() writes it), DeadlineExceeded -> TimeoutError,
// NotFound / AlreadyExists -> KeyError, anything else -> RuntimeError
// (prefixed with the status code's name).
#ifndef ATP_PYTHON_SRC_STATUS_H_
#define ATP_PYTHON_SRC_STATUS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pybind11/pybind11.h"

namespace atp::python {

// ThrowIfError: raises the Python exception for `status` (nothing when OK).
void ThrowIfError(const absl::Status& status);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

// Seconds <-> absl::Duration for option fields (float seconds in Python;
// None or inf is InfiniteDuration).
double DurationToSeconds(absl::Duration d);
absl::Duration SecondsToDuration(double seconds);

}  // namespace atp::python

#endif  // ATP_PYTHON_SRC_STATUS_H_
