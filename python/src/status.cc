#include "python/src/status.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "atp/errno_status.h"

namespace atp::python {

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  if (const std::optional<int> error = ErrnoOf(status)) {
    // OSError(errno, message) is the errno's subclass (FileNotFoundError,
    // PermissionError, ...) with .errno set, whatever the status code.
    PyErr_SetObject(PyExc_OSError, pybind11::make_tuple(*error, message).ptr());
    throw pybind11::error_already_set();
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      throw pybind11::value_error(message);
    case absl::StatusCode::kDeadlineExceeded:
      PyErr_SetString(PyExc_TimeoutError, message.c_str());
      throw pybind11::error_already_set();
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
      throw pybind11::key_error(message);
    default:
      throw std::runtime_error(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

double DurationToSeconds(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return std::numeric_limits<double>::infinity();
  return absl::ToDoubleSeconds(d);
}

absl::Duration SecondsToDuration(double seconds) {
  if (std::isinf(seconds) && seconds > 0) return absl::InfiniteDuration();
  if (std::isnan(seconds)) throw pybind11::value_error("a duration in seconds must not be NaN");
  return absl::Seconds(seconds);
}

}  // namespace atp::python
