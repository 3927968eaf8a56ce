// examples/common/window_flags.h: every tool's window and slots, from the
// path's bandwidth-delay product by default (atp/window_sizing.h,
// docs/protocol.md "Windows from the bandwidth-delay product").
//
//   --link_gbps=G --path_rtt_us=R   the path (either one given: the other
//                                   defaults to kDefaultLinkGbps or
//                                   kDefaultPathRttUs): window and slots per
//                                   queue from G x R, divided over --io_threads
//   neither                         JobOptions' fixed defaults (1024 slots,
//                                   window 200): what an application's default
//                                   Worker uses, so a default atp-ps serves it
//   --slots=S --window=W            explicit values instead (either or both;
//                                   the other one still comes from the path,
//                                   widened or narrowed to fit)
//
// Every worker and PS of a job must end with the same slots: the tools and
// the library apply the same defaults, so they agree unless told otherwise, and the PS refuses
// a worker whose slots differ (kMismatch naming "slots"). A switch should
// hold an aggregator for every window slot of every queue of the jobs it
// serves (RequiredAggregators; scripts/testbed sizes and checks it).
//
//   ATP_RETURN_IF_ERROR(ApplyWindowFlags(&job));   // job.io_threads already set
#ifndef ATP_EXAMPLES_COMMON_WINDOW_FLAGS_H_
#define ATP_EXAMPLES_COMMON_WINDOW_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "atp/options.h"

namespace atp::examples {

// The default path: a 100 Gb/s link (the design card's NIC) and a 20 us
// round trip (worker -> ToR -> PS -> ToR -> worker on a real rack; atp-ping
// measures 40-60 us on a shared 2-core machine). One I/O thread: a window of
// 758 fragments in 2048 slots (bench/RESULTS.md, "Windows and slots from the
// path by default").
inline constexpr double kDefaultLinkGbps = 100;
inline constexpr double kDefaultPathRttUs = 20;

// ApplyWindowFlags: sets job->slots and job->initial_window from the flags
// above, for job->io_threads queues; InvalidArgumentError naming the flag for
// a bad value (--slots not a power of two in 1..65536, --window not in
// 1..--slots, a path out of range, --link_gbps/--path_rtt_us given with both
// --slots and --window, which would ignore them).
absl::Status ApplyWindowFlags(JobOptions* job);

// RequiredAggregators: aggregators a switch needs so that every window slot
// of every queue of `jobs` jobs shaped like `job` can hold its own:
// slots x io_threads x jobs.
uint64_t RequiredAggregators(const JobOptions& job, int jobs);

// DescribeWindow: "window 758 of 2048 slots per queue (100 Gb/s x 20 us)",
// naming --slots/--window when given, for the tools' start-up lines.
std::string DescribeWindow(const JobOptions& job);

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_WINDOW_FLAGS_H_
