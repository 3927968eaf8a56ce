// atp/window_sizing.h: a job's window slots and initial window from its
// path's bandwidth-delay product.
//
//   atp::PathEstimate path{.link_bits_per_second = 100e9,
//                          .round_trip = absl::Microseconds(10)};
//   absl::Status s = atp::SizeWindowsForPath(path, &job);   // sets slots, initial_window
//
// The formula (docs/protocol.md "Windows from the bandwidth-delay product"):
//
//   frames in flight per worker  F = ceil(link_bits_per_second x round_trip
//                                         / (8 x kWireBytesPerFrame))
//   initial_window (per queue)   W = max(1, ceil(F / io_threads))
//   slots (per queue)            S = the power of two >= 2 W
//
// kWireBytesPerFrame is what one 306-byte ATP frame takes of an Ethernet
// link (FCS, preamble and inter-frame gap: 330 bytes). S leaves room for the
// window to grow to twice the BDP before a congestion signal halves it
// (AIMD), so the window is bound by the path, not by its slots. The parameter
// servers' ParameterServerOptions::slots must then equal the job's slots.
#ifndef ATP_WINDOW_SIZING_H_
#define ATP_WINDOW_SIZING_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "atp/options.h"

namespace atp {

// Bytes of an Ethernet link one 306-byte ATP frame occupies: + 4 FCS,
// + 8 preamble and start delimiter, + 12 inter-frame gap.
inline constexpr uint32_t kWireBytesPerFrame = 330;

// PathEstimate: the path a worker's fragments take to the aggregation and
// back.
struct PathEstimate {
  // The slowest link on the path, bits per second: (0, 1e13].
  double link_bits_per_second = 0;
  // The round trip of one fragment (worker -> switch -> PS -> worker):
  // measured (atp-ping's p50) or configured; (0, 1 s].
  absl::Duration round_trip = absl::ZeroDuration();

  absl::Status Validate(std::string_view field = "PathEstimate") const;
};

// WindowSizing: what SizeWindowsForPath puts into JobOptions.
struct WindowSizing {
  uint64_t frames_in_flight = 0;  // F above: the bandwidth-delay product in frames
  uint32_t initial_window = 0;    // W
  uint32_t slots = 0;             // S
};

// WindowForPath: the formula above; InvalidArgumentError naming the field
// for a path out of range or io_threads outside 1..16. A BDP beyond what
// 65536 slots hold is capped (slots 65536, window 32768).
absl::StatusOr<WindowSizing> WindowForPath(const PathEstimate& path, uint32_t io_threads);

// SizeWindowsForPath: sets job->slots and job->initial_window from `path`
// and job->io_threads. Explicit values are the caller's to keep: call it
// only when none were given.
absl::Status SizeWindowsForPath(const PathEstimate& path, JobOptions* job);

}  // namespace atp

#endif  // ATP_WINDOW_SIZING_H_
