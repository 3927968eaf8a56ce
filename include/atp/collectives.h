// atp/collectives.h: ring allreduce with SkipReduce, over gloo's transport.
//
// The baseline collective beside ATP's push/pull (issue 11): a ring allreduce
// (N-1 reduce-scatter + N-1 all-gather steps, each slice pipelined in chunks)
// on gloo's pairs and unbound buffers, which can skip steps as SkipReduce
// does (atp/skip_reduce.h). gloo's own allreduce runs on the same context as
// the baseline (GlooAllreduce). Built only when gloo is found at configure
// time: atp/config.h says ATP_HAVE_GLOO, and the target is atp::collectives.
//
//   gloo::rendezvous::HashStore store;            // or a FileStore shared by processes
//   ATP_ASSIGN_OR_RETURN(std::shared_ptr<gloo::Context> context,
//                        atp::collectives::Connect(store, {.rank = r, .ranks = 4}));
//   atp::collectives::RingAllreduceOptions options;
//   options.op = atp::collectives::ReduceOp::kAverage;
//   options.skip = policy.ForTensor(bucket, iteration, 4);
//   ATP_RETURN_IF_ERROR(atp::collectives::RingAllreduce(*context, gradients, options));
//
// Threads: a call blocks its thread until the collective is done on this
// rank. Two calls may run at once on one context only with different tags.
#ifndef ATP_COLLECTIVES_H_
#define ATP_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "atp/skip_reduce.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace atp::collectives {

// ConnectOptions: this rank's place in the group and where it listens.
struct ConnectOptions {
  int rank = 0;
  int ranks = 1;
  // hostname: the address the other ranks reach this one at (TCP).
  std::string hostname = "127.0.0.1";
  // timeout: for connecting and, as the context's default, for operations.
  absl::Duration timeout = absl::Seconds(30);

  absl::Status Validate(std::string_view field = "ConnectOptions") const;
};

// Connect: a gloo context of `ranks` ranks over TCP, meeting through
// `store` (every rank passes a store that sees the same keys). Blocks until
// every rank has connected. The store must outlive the call only.
absl::StatusOr<std::shared_ptr<gloo::Context>> Connect(gloo::rendezvous::Store& store,
                                                       const ConnectOptions& options);

enum class ReduceOp : uint8_t { kSum, kAverage };

// RingAllreduceOptions: one allreduce. Every rank passes the same values.
struct RingAllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  // skip: the steps skipped (atp/skip_reduce.h); kNone: a plain allreduce.
  // With ReduceOp::kSum the divisor is ignored.
  SkipOptions skip;
  // chunk_bytes: the pipelining unit: each slice travels in
  // ceil(slice bytes / chunk_bytes) messages, so a rank forwards the first
  // chunk of a slice while the next is on the wire. A multiple of 4.
  size_t chunk_bytes = size_t{1} << 20;
  // window_chunks: receives posted ahead of the one being reduced. The
  // calling thread keeps window_chunks x chunk_bytes of scratch between
  // calls (thread-local; freed when the thread ends).
  int window_chunks = 4;
  // tag: tells apart collectives running at the same time on one context
  // (0..2^24-1: it is part of every message's gloo slot).
  uint32_t tag = 0;
  absl::Duration timeout = absl::Seconds(30);

  absl::Status Validate(int ranks, std::string_view field = "RingAllreduceOptions") const;
};

// RingAllreduce: reduces `data` (float32, the same length on every rank) in
// place across the context's ranks, skipping what options.skip says
// (atp/skip_reduce.h: SkipPlan says what every slice holds). Before any data
// moves, every rank sends its length, op, chunk_bytes and skip to every
// other rank (N-1 messages of 56 bytes each way); when they differ, every
// rank returns InvalidArgument naming the first rank that differs from rank
// 0 and how ("rank 1 has 9 values, rank 0 has 10 ...", "rank 1's options
// differ from rank 0's in chunk_bytes ..."), with `data` untouched, and the context
// stays usable for the next call. Zero values on every rank is a
// valid call (OK, nothing to do); zero beside a non-zero length is refused.
// A rank whose own options are invalid returns why (InvalidArgument), and
// still exchanges its message, marked invalid, with the others, so that they
// return InvalidArgument ("rank 2's options are invalid ...") at once; only
// an invalid tag leaves them to their timeout (it does not address their
// call). If the others never come, its own wait ends at its timeout with
// that failure's code instead, why in the message.
// Errors: InvalidArgument for bad options or lengths that differ;
// Unavailable when the transport fails or the timeout passes, Aborted when a
// wait was aborted (the context is then unusable: gloo closes every pair of
// a context whose wait timed out).
absl::Status RingAllreduce(gloo::Context& context, std::span<float> data,
                           const RingAllreduceOptions& options);

// GlooAllreduce: gloo's own ring allreduce (gloo::allreduce, algorithm RING)
// on the same data: the baseline. Sum only.
absl::Status GlooAllreduce(const std::shared_ptr<gloo::Context>& context, std::span<float> data,
                           absl::Duration timeout = absl::Seconds(30));

}  // namespace atp::collectives

#endif  // ATP_COLLECTIVES_H_
