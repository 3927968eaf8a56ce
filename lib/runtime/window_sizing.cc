// lib/runtime/window_sizing.cc: atp/window_sizing.h, the bandwidth-delay
// product of a path in ATP frames, turned into window slots.
#include "atp/window_sizing.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "atp/wire.h"

namespace atp {
namespace {

constexpr uint32_t kMaxSlots = 1u << 16;  // JobOptions::slots' ceiling (lib/options/options.cc)
constexpr double kMaxLinkBitsPerSecond = 1e13;

absl::Status FieldError(std::string_view field, std::string_view name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(field.data(), field.size()),
                                                 ".", absl::string_view(name.data(), name.size()),
                                                 ": ", what));
}

}  // namespace

absl::Status PathEstimate::Validate(std::string_view field) const {
  // !(x > 0) also refuses NaN.
  if (!(link_bits_per_second > 0) || link_bits_per_second > kMaxLinkBitsPerSecond) {
    return FieldError(field, "link_bits_per_second",
                      absl::StrCat(link_bits_per_second, " is not in (0, 1e13]"));
  }
  if (round_trip <= absl::ZeroDuration() || round_trip > absl::Seconds(1)) {
    return FieldError(field, "round_trip",
                      absl::StrCat(absl::FormatDuration(round_trip), " is not in (0, 1s]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WindowSizing> WindowForPath(const PathEstimate& path, uint32_t io_threads) {
  if (absl::Status s = path.Validate(); !s.ok()) return s;
  if (io_threads < 1 || io_threads > static_cast<uint32_t>(wire::kMaxQueues)) {
    return absl::InvalidArgumentError(
        absl::StrCat("io_threads: ", io_threads, " is not in 1..", wire::kMaxQueues));
  }
  // At most 1e13 b/s x 1 s / 2640 b: about 3.8e9 frames, exact in a double.
  const double bits_in_flight = path.link_bits_per_second * absl::ToDoubleSeconds(path.round_trip);
  WindowSizing sizing;
  sizing.frames_in_flight =
      static_cast<uint64_t>(std::ceil(bits_in_flight / (8.0 * kWireBytesPerFrame)));
  const uint64_t per_queue = (sizing.frames_in_flight + io_threads - 1) / io_threads;
  sizing.initial_window =
      static_cast<uint32_t>(std::clamp<uint64_t>(per_queue, 1, kMaxSlots / 2));
  sizing.slots = std::bit_ceil(2 * sizing.initial_window);
  return sizing;
}

absl::Status SizeWindowsForPath(const PathEstimate& path, JobOptions* job) {
  absl::StatusOr<WindowSizing> sizing = WindowForPath(path, job->io_threads);
  if (!sizing.ok()) return sizing.status();
  job->slots = sizing->slots;
  job->initial_window = sizing->initial_window;
  return absl::OkStatus();
}

}  // namespace atp
