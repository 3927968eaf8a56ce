// python/src/status.h: absl::Status -> Python exceptions, and the
// conversions every binding file shares.
//
// A failed system call's status (atp::ErrnoStatus: a bind to an address
// this host lacks, a port in use) -> OSError(errno, message), whatever its
// code: the code is absl's folding of the errno (EADDRNOTAVAIL is
// AlreadyExists), which would otherwise surface as a KeyError. Then by code:
// InvalidArgument / OutOfRange -> ValueError (the message starts with the
// offending field's path, as Validate() writes it), DeadlineExceeded ->
// TimeoutError, NotFound / AlreadyExists -> KeyError (left to lookups by
// key: Worker.push of a key that holds one, pull / discard of one with
// none, a loopback address already on its wire), anything else ->
// RuntimeError (prefixed with the status code's name).
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
