// lib/collectives/ring_allreduce.cc: RingAllreduce (atp/collectives.h).
//
// The schedule comes from SkipPlan (atp/skip_reduce.h); this file only moves
// and adds bytes. Messages from rank r to rank r+1 are numbered m = i * C + c
// (i: the i-th step that runs, c: the chunk of its slice, C chunks per
// slice), and each has its own gloo slot, so matching never depends on order.
// Rank r posts the receives of messages m..m+W-1 ahead (W = window_chunks),
// sends all chunks of its first step at once, and sends chunk c of step i+1
// as soon as it has reduced (or received) chunk c of step i: the slice a
// rank receives in one step is the one it sends in the next, so chunks flow
// through the ring one behind the other.
//
// Memory safety of receiving straight into `data` in all-gather: a slice
// arrives in all-gather only after its whole reduce-scatter chain has
// passed, i.e. after every send of that slice by this rank was received.
//
// Before any data message, every rank sends its element count and the
// options that shape the messages to every other rank (56 bytes each, on a
// slot of their own) and all ranks compare the same list, so they refuse a
// mismatch together: gloo aborts the process when a
// message is larger than the receive posted for it, and it does so on its
// own device thread, out of reach of the catch below. Only a unanimous
// refusal leaves no data send or receive posted that a later call on the
// same slots could match; a check with the neighbours only would let ranks
// far from the mismatch start the ring and time out (closing the context).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/collectives.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "lib/collectives/gloo_status.h"

namespace atp::collectives {
namespace {

// AddInto: dst[i] += src[i]. Written in blocks of 8 so that -O2's
// straight-line (SLP) vectorizer turns each block into vector adds.
void AddInto(float* __restrict dst, const float* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    dst[i + 0] += src[i + 0];
    dst[i + 1] += src[i + 1];
    dst[i + 2] += src[i + 2];
    dst[i + 3] += src[i + 3];
    dst[i + 4] += src[i + 4];
    dst[i + 5] += src[i + 5];
    dst[i + 6] += src[i + 6];
    dst[i + 7] += src[i + 7];
  }
  for (; i < n; ++i) dst[i] += src[i];
}

void Scale(float* values, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) values[i] *= factor;
}

// Slots of this file's messages: a prefix byte gloo's own collectives do not
// use (theirs are 0x01..0x08, gloo/types.h), the tag, then the message
// number. The count exchange has a prefix of its own, so its 8-byte messages
// never meet a data message's receive, nor a data message theirs.
constexpr uint64_t kSlotPrefix = uint64_t{0xA7} << 56;
constexpr uint64_t kCountSlotPrefix = uint64_t{0xA8} << 56;

uint64_t CountSlot(uint32_t tag) { return kCountSlotPrefix | (static_cast<uint64_t>(tag) << 32); }

// Shape: what every rank of one call must agree on before any data moves:
// its element count, and the options that decide the messages' sizes and
// what they hold. Sent as raw bytes: fixed width, no implicit padding.
struct Shape {
  uint64_t count = 0;
  uint64_t chunk_bytes = 0;
  uint64_t seed = 0;
  uint64_t iteration = 0;
  uint64_t tensor = 0;
  int32_t reduce_scatter_steps = 0;
  int32_t all_gather_steps = 0;
  uint8_t op = 0;
  uint8_t mode = 0;
  uint8_t divisor = 0;
  // invalid: this rank's options failed validation; it takes part in the
  // exchange only so that the others fail now instead of at their timeout.
  uint8_t invalid = 0;
  uint8_t padding[4] = {};

  bool operator==(const Shape&) const = default;
};
static_assert(sizeof(Shape) == 56 && std::is_trivially_copyable_v<Shape>);

Shape ShapeOf(size_t count, const RingAllreduceOptions& options) {
  const SkipOptions& skip = options.skip;
  return Shape{.count = count,
               .chunk_bytes = options.chunk_bytes,
               .seed = skip.seed,
               .iteration = skip.iteration,
               .tensor = skip.tensor,
               .reduce_scatter_steps = skip.reduce_scatter_steps,
               .all_gather_steps = skip.all_gather_steps,
               .op = static_cast<uint8_t>(options.op),
               .mode = static_cast<uint8_t>(skip.mode),
               .divisor = static_cast<uint8_t>(skip.divisor)};
}

// DifferingOption: the name of the first option in which `a` and `b`
// differ (their counts are equal).
const char* DifferingOption(const Shape& a, const Shape& b) {
  if (a.op != b.op) return "op";
  if (a.chunk_bytes != b.chunk_bytes) return "chunk_bytes";
  if (a.mode != b.mode) return "skip.mode";
  if (a.reduce_scatter_steps != b.reduce_scatter_steps) return "skip.reduce_scatter_steps";
  if (a.all_gather_steps != b.all_gather_steps) return "skip.all_gather_steps";
  if (a.divisor != b.divisor) return "skip.divisor";
  if (a.seed != b.seed) return "skip.seed";
  if (a.iteration != b.iteration) return "skip.iteration";
  return "skip.tensor";
}

// ExchangeShapes: every rank's Shape, indexed by rank (the same list on every
// rank). Every receive is exactly sizeof(Shape), as is every message on
// CountSlot, so none can overrun its buffer; all sends and receives have
// completed when it returns OK.
absl::StatusOr<std::vector<Shape>> ExchangeShapes(gloo::Context& context, const Shape& shape,
                                                  const RingAllreduceOptions& options) {
  std::vector<Shape> shapes(static_cast<size_t>(context.size));
  shapes[context.rank] = shape;
  Shape mine = shape;
  std::unique_ptr<gloo::transport::UnboundBuffer> send =
      context.createUnboundBuffer(&mine, sizeof(mine));
  std::unique_ptr<gloo::transport::UnboundBuffer> recv =
      context.createUnboundBuffer(shapes.data(), shapes.size() * sizeof(Shape));
  const uint64_t slot = CountSlot(options.tag);
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    recv->recv(peer, slot, static_cast<size_t>(peer) * sizeof(Shape), sizeof(Shape));
    send->send(peer, slot, 0, sizeof(Shape));
  }
  const std::chrono::milliseconds timeout = ToMilliseconds(options.timeout);
  for (int peers = 1; peers < context.size; ++peers) {
    if (!recv->waitRecv(nullptr, timeout)) {
      return absl::AbortedError("RingAllreduce: receiving the ranks' counts aborted");
    }
  }
  for (int peers = 1; peers < context.size; ++peers) {
    if (!send->waitSend(nullptr, timeout)) {
      return absl::AbortedError("RingAllreduce: sending this rank's count aborted");
    }
  }
  return shapes;
}

// ShapesAgree: OK when every rank has valid options and the same count and
// options; otherwise InvalidArgument naming the first rank whose options are
// invalid, or else the first that differs from rank 0. Every rank computes
// the same answer from the same list.
absl::Status ShapesAgree(const std::vector<Shape>& shapes) {
  for (size_t r = 0; r < shapes.size(); ++r) {
    if (shapes[r].invalid != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RingAllreduce: rank ", r,
          "'s options are invalid (its own call returned InvalidArgument saying which)"));
    }
  }
  for (size_t r = 1; r < shapes.size(); ++r) {
    if (shapes[r].count != shapes[0].count) {
      std::vector<uint64_t> counts;
      for (const Shape& shape : shapes) counts.push_back(shape.count);
      return absl::InvalidArgumentError(absl::StrCat(
          "RingAllreduce: rank ", r, " has ", shapes[r].count, " values, rank 0 has ",
          shapes[0].count, " (every rank must pass the same number; values by rank: ",
          absl::StrJoin(counts, ", "), ")"));
    }
    if (!(shapes[r] == shapes[0])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RingAllreduce: rank ", r, "'s options differ from rank 0's in ",
          DifferingOption(shapes[r], shapes[0]), " (every rank must pass the same)"));
    }
  }
  return absl::OkStatus();
}

// EveryRankAgrees: the exchange and the comparison; a context of one rank
// has nothing to compare.
absl::Status EveryRankAgrees(gloo::Context& context, size_t count,
                             const RingAllreduceOptions& options) {
  if (context.size == 1) return absl::OkStatus();
  absl::StatusOr<std::vector<Shape>> shapes =
      ExchangeShapes(context, ShapeOf(count, options), options);
  if (!shapes.ok()) return shapes.status();
  return ShapesAgree(*shapes);
}

// TellOthersInvalid: this rank's options failed validation (`why`): it still
// exchanges a Shape, marked invalid, with the others on the call's count
// slot (waiting for theirs as a valid call would), so that they return
// InvalidArgument now rather than Unavailable at their timeout; returns
// `why`. Only a usable tag addresses the others' call (an invalid one leaves
// them to their timeout); an invalid timeout is replaced by the default.
// When the exchange itself fails (the others never came: the context is
// then closed, as after any timeout), that failure's code is returned, with
// `why` in its message: InvalidArgument would promise a usable context.
absl::Status TellOthersInvalid(gloo::Context& context, size_t count,
                               const RingAllreduceOptions& options, absl::Status why) {
  if (context.size == 1 || options.tag >= (uint32_t{1} << 24)) return why;
  RingAllreduceOptions usable = options;
  if (usable.timeout <= absl::ZeroDuration()) usable.timeout = RingAllreduceOptions{}.timeout;
  Shape shape = ShapeOf(count, options);
  shape.invalid = 1;
  absl::Status told;
  try {
    told = ExchangeShapes(context, shape, usable).status();
  } catch (const std::exception& e) {
    told = GlooError("RingAllreduce", e);
  }
  if (told.ok()) return why;
  return absl::Status(told.code(), absl::StrCat(why.message(), "; telling the other ranks failed: ",
                                                told.message()));
}

struct Step {
  bool reduce;     // reduce-scatter (add into data) or all-gather (copy)
  int recv_slice;  // slice received from rank - 1
  int send_slice;  // slice sent to rank + 1
};

class RingRun {
 public:
  RingRun(gloo::Context& context, std::span<float> data, const RingAllreduceOptions& options,
          const SkipPlan& plan)
      : context_(context),
        data_(data),
        options_(options),
        plan_(plan),
        rank_(context.rank),
        ranks_(context.size),
        left_((context.rank + context.size - 1) % context.size),
        right_((context.rank + 1) % context.size),
        timeout_(ToMilliseconds(options.timeout)) {
    for (int s = 0; s < ranks_ - 1; ++s) {
      if (plan_.ReduceScatterStepRuns(s)) {
        steps_.push_back({true, plan_.ReduceScatterRecvSlice(rank_, s),
                          plan_.ReduceScatterSendSlice(rank_, s)});
      }
    }
    for (int t = 0; t < ranks_ - 1; ++t) {
      if (plan_.AllGatherStepRuns(t)) {
        steps_.push_back(
            {false, plan_.AllGatherRecvSlice(rank_, t), plan_.AllGatherSendSlice(rank_, t)});
      }
    }
    const size_t chunk_elements = options_.chunk_bytes / sizeof(float);
    const size_t largest_slice = SliceRange(data_.size(), ranks_, 0).size;
    chunks_ = std::max<size_t>(1, (largest_slice + chunk_elements - 1) / chunk_elements);
    window_ = static_cast<size_t>(options_.window_chunks);
    scratch_chunk_ = (largest_slice + chunks_ - 1) / chunks_;
  }

  absl::Status Run() {
    const bool average = options_.op == ReduceOp::kAverage;
    const bool owned_before_any_step = steps_.empty() || !steps_.front().reduce;
    if (average && owned_before_any_step) DivideOwned(/*all chunks*/ chunks_);
    if (steps_.empty()) {
      ZeroSlicesNotGathered();
      return absl::OkStatus();
    }
    scratch_ = Scratch(window_ * scratch_chunk_);
    send_buffer_ = context_.createUnboundBuffer(data_.data(), data_.size_bytes());
    const size_t messages = steps_.size() * chunks_;
    if (messages >= (size_t{1} << 32)) {  // the message number's share of a slot
      return absl::InvalidArgumentError(
          absl::StrCat("RingAllreduceOptions.chunk_bytes: ", options_.chunk_bytes,
                       " cuts this tensor into too many messages (", messages, ")"));
    }
    recv_buffers_.resize(messages);
    for (size_t m = 0; m < std::min(window_, messages); ++m) PostRecv(m);
    for (size_t c = 0; c < chunks_; ++c) Send(c);
    for (size_t m = 0; m < messages; ++m) {
      const size_t i = m / chunks_;
      const size_t c = m % chunks_;
      const Step& step = steps_[i];
      const ElementRange chunk = Chunk(step.recv_slice, c);
      if (chunk.size > 0) {
        if (!recv_buffers_[m]->waitRecv(nullptr, timeout_)) {
          return absl::AbortedError(absl::StrCat("RingAllreduce: receive ", m, " aborted"));
        }
        recv_buffers_[m].reset();
        if (step.reduce) {
          AddInto(data_.data() + chunk.begin, ScratchSlot(m), chunk.size);
        }
      }
      const bool last_reduce = step.reduce && (i + 1 == steps_.size() || !steps_[i + 1].reduce);
      if (average && last_reduce) DivideOwnedChunk(c);
      if (m + window_ < messages) PostRecv(m + window_);
      if (i + 1 < steps_.size()) Send(m + chunks_);
    }
    for (size_t s = 0; s < sends_; ++s) {
      if (!send_buffer_->waitSend(nullptr, timeout_)) {
        return absl::AbortedError("RingAllreduce: send aborted");
      }
    }
    ZeroSlicesNotGathered();
    return absl::OkStatus();
  }

 private:
  // Chunk: chunk c of slice `slice`, in elements of data_ (nearly equal parts).
  ElementRange Chunk(int slice, size_t c) const {
    const ElementRange s = SliceRange(data_.size(), ranks_, slice);
    const size_t begin = s.size * c / chunks_;
    const size_t end = s.size * (c + 1) / chunks_;
    return ElementRange{.begin = s.begin + begin, .size = end - begin};
  }
  float* ScratchSlot(size_t m) { return scratch_ + (m % window_) * scratch_chunk_; }

  // Scratch: the receive slots, kept by the calling thread between calls
  // (window_chunks x chunk_bytes, 4 MiB by default), so a call does not
  // fault fresh pages in each time. Every slot is written by a receive
  // before it is read.
  static float* Scratch(size_t elements) {
    thread_local std::unique_ptr<float[]> buffer;
    thread_local size_t capacity = 0;
    if (capacity < elements) {
      buffer = std::make_unique_for_overwrite<float[]>(elements);
      capacity = elements;
    }
    return buffer.get();
  }
  uint64_t Slot(size_t m) const {
    return kSlotPrefix | (static_cast<uint64_t>(options_.tag) << 32) | static_cast<uint64_t>(m);
  }

  void PostRecv(size_t m) {
    const Step& step = steps_[m / chunks_];
    const ElementRange chunk = Chunk(step.recv_slice, m % chunks_);
    if (chunk.size == 0) return;
    float* target = step.reduce ? ScratchSlot(m) : data_.data() + chunk.begin;
    recv_buffers_[m] = context_.createUnboundBuffer(target, chunk.size * sizeof(float));
    recv_buffers_[m]->recv(left_, Slot(m));
  }

  void Send(size_t m) {
    const Step& step = steps_[m / chunks_];
    const ElementRange chunk = Chunk(step.send_slice, m % chunks_);
    if (chunk.size == 0) return;
    send_buffer_->send(right_, Slot(m), chunk.begin * sizeof(float), chunk.size * sizeof(float));
    ++sends_;
  }

  void DivideOwnedChunk(size_t c) {
    const ElementRange chunk = Chunk(plan_.OwnedSlice(rank_), c);
    Scale(data_.data() + chunk.begin, chunk.size, 1.0f / static_cast<float>(plan_.AverageDivisor()));
  }
  void DivideOwned(size_t chunks) {
    for (size_t c = 0; c < chunks; ++c) DivideOwnedChunk(c);
  }

  // ZeroSlicesNotGathered: the slices whose all-gather step was skipped hold
  // a partial sum here; SkipReduce counts them as zero.
  void ZeroSlicesNotGathered() {
    for (int t = 0; t < ranks_ - 1; ++t) {
      if (plan_.AllGatherStepRuns(t)) continue;
      const ElementRange s = SliceRange(data_.size(), ranks_, plan_.AllGatherRecvSlice(rank_, t));
      std::fill_n(data_.data() + s.begin, s.size, 0.0f);
    }
  }

  gloo::Context& context_;
  std::span<float> data_;
  const RingAllreduceOptions& options_;
  const SkipPlan& plan_;
  const int rank_;
  const int ranks_;
  const int left_;
  const int right_;
  const std::chrono::milliseconds timeout_;
  std::vector<Step> steps_;
  size_t chunks_ = 1;         // per slice
  size_t window_ = 1;         // receives posted ahead
  size_t scratch_chunk_ = 0;  // elements per scratch slot (the largest chunk)
  float* scratch_ = nullptr;  // window_ slots of scratch_chunk_ elements (Scratch())
  std::unique_ptr<gloo::transport::UnboundBuffer> send_buffer_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recv_buffers_;
  size_t sends_ = 0;
};

}  // namespace

absl::Status RingAllreduce(gloo::Context& context, std::span<float> data,
                           const RingAllreduceOptions& options) {
  if (absl::Status status = options.Validate(context.size); !status.ok()) {
    return TellOthersInvalid(context, data.size(), options, std::move(status));
  }
  absl::StatusOr<SkipPlan> plan = SkipPlan::Create(options.skip, context.size);
  if (!plan.ok()) return TellOthersInvalid(context, data.size(), options, plan.status());
  try {
    if (absl::Status status = EveryRankAgrees(context, data.size(), options);
        !status.ok()) {
      return status;
    }
    RingRun run(context, data, options, *plan);
    return run.Run();
  } catch (const std::exception& e) {
    return GlooError("RingAllreduce", e);
  }
}

}  // namespace atp::collectives
