// lib/host/worker_io_loop.h: one I/O thread's work for one worker queue:
// it owns a transport Queue and a WorkerQueueEngine, takes pieces of
// operations from the scheduler, moves frames both ways, and finishes the
// pieces whose fragments have all been acknowledged.
//
//   auto loop = WorkerIoLoop::Create(config, engine_config, device.queue(q));
//   loop->Submit(piece);                          // any thread (the Worker)
//   StepResult r = loop->Step(MonotonicNow());    // the I/O thread, over and over
//
// Step is one iteration: take submitted pieces (Enqueue), receive up to a few
// bursts (wire::ValidateFrame's checks, the header decoded from the same
// read, then the source check: only the queue's PS;
// rejects counted; OnParameterPacket dequantizes
// straight from the frame into the output), finish completed pieces
// (averaging, OpState::PieceDone), then send what the engine wants, and
// Flush. Frames or segments the transport did not take are kept and retried
// first.
//
// Sending: the engine quantizes each fragment straight into the bytes that go
// on the medium, in network byte order (CollectSends, wire form: one pass, no
// host-order copy), and the loop adds the headers. How the burst reaches the
// transport depends on the queue (QueueCapabilities::tx_segmentation):
//
//   - kKernelGso / kHardwareTso (the queue offloads segmentation): fragments
//     are written as 264-byte ATP messages back to back in one buffer, and
//     each run of consecutive fragments whose headers differ only in the
//     position bits of seq (consecutive) and the aggregator index goes out
//     as one SegmentationJob in its `messages` form (zero copy: one
//     UDP_SEGMENT send or one TSO work request per run). Per-fragment ATP
//     header fields thus live in each segment's message, and only the L2-L4
//     headers and the fields a run shares come from the template. A run
//     breaks where a header differs otherwise (a resend among first sends,
//     fp, a seq gap), which in steady state is rare.
//   - kSoftware (loopback, DPDK without TSO): software segmentation would
//     replicate the template and copy every payload into a frame, so the
//     fragments are quantized straight into TX-pool frames instead and go out
//     with TxBurst: the same frames with one copy fewer.
//
// Control frames (lib/wire/control_message.h) never reach the engine: Receive
// diverts them to OnControl, which switches on their type. A kStatus from the
// PS naming the workers it waits for feeds the StallWatch; a join request is
// answered with a kJoin (the job's configuration and where the queue's
// stream stands, with the results it holds beyond its lowest unacknowledged
// position), which the loop also sends once at its first Step if
// WorkerIoLoopConfig::join_at_start, and with the kOpBegins of its last
// kRedeclaredPieces pieces (a restarted PS confirms a piece only once every
// worker declared it to it); an operation confirmation is taken only if it
// is of this worker's run (OnOpConfirmed: a late one of the run before
// reaches the job's new workers too); a replay request naming this worker (or
// none) makes it send, a few per Step, the parameter packets it holds of
// the positions asked (kReplay, two frames each, from the engine's received
// copies); a mismatch or an unrecoverable restart fails the queue at once.
//
// Stalls (JobOptions::stall_timeout, atp/failure.h): while the queue has
// pieces to finish, a StallWatch restarts its clock with every fragment that
// completes; when it runs out, the loop records the named failure in the
// Worker's WorkerFailure, finishes every piece it holds with it and stops:
// from then on it neither sends nor hands frames to the engine (whose spans
// the caller may free once the handles finished), so the PS sees the queue
// go quiet and releases its partial state after its orphan timeout. A loop
// whose WorkerFailure another loop recorded does the same at its next Step.
//
// Step never blocks and reads no clock (it is handed `now`), so tests and the
// benchmark drive it directly, without a thread.
#ifndef ATP_LIB_HOST_WORKER_IO_LOOP_H_
#define ATP_LIB_HOST_WORKER_IO_LOOP_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "atp/worker.h"
#include "lib/host/op_state.h"
#include "lib/host/source_admission.h"
#include "lib/host/polling_thread.h"
#include "lib/host/stall_watch.h"
#include "lib/host/worker_failure.h"
#include "lib/protocol/op_begin_message.h"
#include "lib/protocol/status_message.h"
#include "lib/worker/worker_queue_config.h"
#include "lib/worker/worker_queue_engine.h"

namespace atp::host {

// PieceRequest: one piece of an operation for one queue. The spans are the
// caller's (or the Worker's Push buffer) and stay valid until `op` finishes.
struct PieceRequest {
  std::shared_ptr<internal::OpState> op;
  std::span<const float> input;
  std::span<float> output;
  Reduction reduction = Reduction::kSum;
  // average_divisor: what kAverage divides by; 0: the job's worker count.
  // SkipReduce's DropReduce sets N - k (OpOptions::skip).
  int average_divisor = 0;
  uint64_t fragments = 0;
  uint64_t op_values = 0;  // the whole operation's values (kOpBegin)
  worker::FragmentSkip skip;  // SkipReduce: the fragments left out (none by default)
};

struct WorkerIoLoopConfig {
  transport::DeviceAddress self;  // source of the frames
  transport::DeviceAddress ps;    // destination: the PS serving this queue
  // parameter_source_check: received frames are handed to the engine only
  // from `ps` (lib/host/source_admission.h); the rest count as source_refused.
  SourceCheck parameter_source_check = SourceCheck::kIpv4;
  uint16_t base_port = wire::kDefaultBasePort;
  uint32_t max_burst = 32;        // 1..256
  int total_workers = 1;          // for Reduction::kAverage
  // stall_timeout: JobOptions::stall_timeout (Infinite: never fails).
  TimeDelta stall_timeout = TimeDelta::Infinite();
  // failure: the Worker's first failure, shared by its loops; null: a loop of
  // its own (tests).
  std::shared_ptr<WorkerFailure> failure;
  // For joins (lib/protocol/join_message.h): the Worker's random incarnation
  // and JobOptions::io_threads.
  uint64_t incarnation = 0;
  uint32_t io_threads = 1;
  // join_at_start: send a kJoin at the first Step (the Worker does, so that
  // the PS checks its configuration at once; tests counting frames do not).
  // Join requests from the PS are answered either way.
  bool join_at_start = false;
  // confirm_operations: declare every piece to the PS (kOpBegin) and deliver
  // its result only once the PS confirmed that every worker declared it
  // alike (the Worker does; tests counting frames do not).
  bool confirm_operations = false;
};

class WorkerIoLoop {
 public:
  static constexpr size_t kMaxBurst = 256;
  // Bursts received per Step at most, so that sending is not starved.
  static constexpr int kRxBurstsPerStep = 4;
  // Bursts sent per Step at most.
  static constexpr int kTxBurstsPerStep = 8;

  // Create: `queue` (its queue index is the engine's) is used only from the
  // thread that calls Step from then on; it must outlive the loop.
  static absl::StatusOr<std::unique_ptr<WorkerIoLoop>> Create(
      const WorkerIoLoopConfig& config, const worker::WorkerQueueConfig& engine_config,
      transport::Queue& queue);

  WorkerIoLoop(const WorkerIoLoop&) = delete;
  WorkerIoLoop& operator=(const WorkerIoLoop&) = delete;
  // Returns the frames it still holds to their pools (call after the thread
  // stopped).
  ~WorkerIoLoop();

  // Submit: queues a piece for the next Step. Any thread; pieces are taken
  // in Submit order.
  void Submit(PieceRequest piece);

  // Step: one iteration (see the header comment). The I/O thread only.
  StepResult Step(TimePoint now);

  // Abandon: gives up every piece not yet done (submitted or in the engine)
  // with `status` (OpState::PieceFailed: its operation fails once its pieces
  // on other queues have stopped too). On the thread running Step, or once
  // it has stopped.
  void Abandon(const absl::Status& status);

  // statistics: the last published snapshot. Any thread.
  WorkerQueueStatistics statistics() const;

  // Publish: snapshot the statistics now (the thread running Step, or after
  // it stopped).
  void Publish();
  const worker::WorkerQueueEngine& engine() const { return *engine_; }
  // spare_tx_frames: frames taken from the TX pool and kept for the next
  // sends (at most a burst; returned by the destructor).
  size_t spare_tx_frames() const { return tx_spare_; }

  uint32_t queue_index() const { return queue_.index(); }
  int wait_fd() const { return queue_.wait_fd(); }

 private:
  struct Record {
    std::shared_ptr<internal::OpState> op;
    std::span<float> output;
    Reduction reduction = Reduction::kSum;
    int average_divisor = 0;  // PieceRequest::average_divisor
    bool done = false;
    uint64_t piece = 0;        // its number in the queue (kOpBegin)
    bool confirmed = true;     // the PS confirmed it (or confirmation is off)
    bool engine_done = false;  // the engine completed it
  };

  WorkerIoLoop(const WorkerIoLoopConfig& config, std::unique_ptr<worker::WorkerQueueEngine> engine,
               transport::Queue& queue);

  // SendOutcome: what one burst of sends did.
  struct SendOutcome {
    size_t collected = 0;  // fragments the engine wrote
    size_t capacity = 0;   // room it was given
    bool blocked = false;  // the transport took fewer: the rest is pending
  };

  bool TakeSubmitted(TimePoint now);
  bool Receive(TimePoint now);
  // OnControl: a valid control frame (fields and payload decoded).
  void OnControl(std::span<const uint8_t> frame, TimePoint now);
  // SendJoin: one kJoin to the PS, answering the join request of the PS
  // incarnation `answers` (0: unasked). Dropped if the transport has no
  // room: the PS asks again.
  void SendJoin(uint64_t answers);
  // SendControl: one control frame to the PS about `position` of the queue
  // (dropped if there is no room).
  void SendControl(const wire::ControlMessage& control, uint64_t position = 0);
  // TakeTxFrame: a frame to send one control frame in: the oldest spare of
  // tx_frames_ if there is one, else a new one from the pool; false if none.
  bool TakeTxFrame(transport::FrameRef* frame);
  // SendReplays: replays (kReplay) of the positions the PS asked for, at most
  // a burst of frames; true if it sent any.
  bool SendReplays();
  // GlobalIndex: this worker's rack-major index in the job.
  int GlobalIndex() const;
  // ResendOpBegins: the kOpBegins not yet confirmed, once per RTO.
  void ResendOpBegins(TimePoint now);
  // RedeclarePieces: the kOpBegins of declared_ again (on a join request).
  void RedeclarePieces();
  // OnOpConfirmed: a kOpConfirmed status: takes it if it is of this
  // worker's run (run_), else ignores it (the .cc has why).
  void OnOpConfirmed(const protocol::StatusBody& status, TimePoint now);
  // Deliver: finishes `record` (averaging) into finishing_.
  void Deliver(Record& record);
  // DeliverFinished: pops delivered records, publishes, runs PieceDone.
  void DeliverFinished();
  // OnStatus: a decoded kStatus from the PS incarnation `ps_incarnation`.
  void OnStatus(const protocol::StatusBody& status, uint64_t ps_incarnation, TimePoint now);
  // Fail: records `status` with `failure` as the Worker's first failure and
  // fails the queue with the Worker's first failure.
  void Fail(absl::Status status, const Failure& failure);
  // CheckStall: fails the queue when the StallWatch says it stalled.
  void CheckStall(TimePoint now);
  // FailQueue: gives up every piece with `status` (Abandon) and stops the queue.
  void FailQueue(const absl::Status& status);
  // StepFailed: Step after the queue failed: drain and drop what arrives,
  // refuse what is submitted.
  StepResult StepFailed();
  bool Busy() const { return !records_.empty(); }
  bool FinishCompleted();
  bool Transmit(TimePoint now);
  // SendFrames / SendSegmented: one burst, as frames (TxBurst) or as
  // segmentation jobs (TxSegmented); see the header comment.
  SendOutcome SendFrames(TimePoint now);
  SendOutcome SendSegmented(TimePoint now);
  // SendSegmentRuns: offers segments [segments_head_, segments_end_) of the
  // message buffer as jobs, run by run; false when the transport took fewer.
  bool SendSegmentRuns();
  // RetryPending: offers the frames or segments the transport did not take;
  // false while some remain.
  bool RetryPending();
  bool HasPending() const {
    return pending_head_ < pending_.size() || segments_head_ < segments_end_;
  }

  const WorkerIoLoopConfig config_;
  const SourceAdmission from_ps_;  // config_.ps, as config_.parameter_source_check says
  std::unique_ptr<worker::WorkerQueueEngine> engine_;
  transport::Queue& queue_;
  const size_t burst_;
  // The first 42 bytes (Ethernet, IPv4, UDP) of every frame this queue sends:
  // the same addresses, TOS and ports every time, so they (and the IPv4
  // checksum) are encoded once; only the ATP header and payload change.
  std::array<uint8_t, wire::kL2L4HeaderBytes> l2l4_template_{};
  // The queue offloads segmentation (kKernelGso, kHardwareTso).
  const bool offload_segmentation_;

  // Burst buffers, preallocated.
  std::vector<transport::FrameRef> rx_frames_;
  std::vector<transport::FrameRef> tx_frames_;
  std::vector<wire::AtpHeader> tx_headers_;
  // Where the engine quantizes message i: SendFrames, the payload of
  // tx_frames_[k] at tx_payloads_[k] (two bursts); SendSegmented, the first
  // burst_ point into segment_messages_.
  std::vector<uint8_t*> tx_payloads_;
  // Offload only: burst_ ATP messages (264 bytes each) back to back, the
  // payload of message i at tx_payloads_[i]; its aggregator indices.
  std::vector<uint8_t> segment_messages_;
  std::vector<uint16_t> segment_aggregators_;
  // Segments collected but not yet taken: [segments_head_, segments_end_).
  size_t segments_head_ = 0;
  size_t segments_end_ = 0;
  // tx_frames_[tx_first_, tx_first_ + tx_spare_): allocated, not yet used
  // (kept across Steps, in allocation order). tx_frames_ holds two bursts,
  // so the spares move to the front only once the used ones fill a burst.
  size_t tx_first_ = 0;
  size_t tx_spare_ = 0;
  std::vector<worker::OperationId> completed_ids_;
  // Frames encoded but not yet taken by the transport: [pending_head_, end).
  std::vector<transport::FrameRef> pending_;
  size_t pending_head_ = 0;
  size_t held_by_queue_ = 0;  // what the last Flush said it still holds

  // Pieces in the engine, by engine OperationId: records_[id - first_id_].
  std::deque<Record> records_;
  worker::OperationId first_id_ = 1;
  std::vector<std::shared_ptr<internal::OpState>> finishing_;

  // Submission inbox.
  std::mutex inbox_mu_;
  std::vector<PieceRequest> inbox_;               // under inbox_mu_
  std::vector<PieceRequest> taking_;              // the I/O thread's swap buffer
  std::atomic<size_t> inbox_size_{0};

  StallWatch stall_;
  uint64_t completions_seen_ = 0;  // the engine's parameter_packets at the last Receive
  bool failed_ = false;            // FailQueue ran: the engine is never touched again
  bool joined_ = false;            // the first join went out
  uint64_t next_piece_ = 0;        // kOpBegin numbering
  std::deque<protocol::OpBeginBody> unconfirmed_;  // declared, not yet confirmed
  // The last kRedeclaredPieces declared, confirmed or not: declared again on
  // a join request, since a restarted PS confirms a piece only once every
  // worker declared it to it, and a worker whose piece the dead PS confirmed
  // never declares it again by itself (RedeclarePieces).
  std::deque<protocol::OpBeginBody> declared_;
  static constexpr size_t kRedeclaredPieces = 32;
  // run_: the run digest (protocol::StatusBody::run) of the last confirmation
  // that answered this worker's own declaration; 0: none yet. Confirmations
  // of another digest are not this run's (OnOpConfirmed).
  uint64_t run_ = 0;
  // resent_for_foreign_: since run_ was last learned, an unconfirmed piece's
  // confirmation of another digest brought the kOpBegin resend forward
  // (once: the PS's answer names this worker, and then run_ is learned).
  bool resent_for_foreign_ = false;
  // Positions [first, end) the PS asked this worker to replay, oldest first
  // (at most kMaxReplayRanges; the PS asks again for what is still missing).
  static constexpr size_t kMaxReplayRanges = 256;
  struct ReplayRange {
    uint64_t first = 0;
    uint64_t end = 0;
  };
  std::deque<ReplayRange> replays_;
  TimePoint next_op_begin_resend_;

  // Counters kept here (the engine and queue keep the rest).
  uint64_t control_frames_ = 0;    // control frames received and understood
  uint64_t control_rejected_ = 0;  // control frames that did not decode or do not belong here
  uint64_t frames_received_ = 0;
  uint64_t decode_errors_ = 0;
  uint64_t source_refused_ = 0;
  uint64_t frames_sent_ = 0;
  uint64_t fragments_assigned_ = 0;
  TimePoint next_publish_;

  mutable std::mutex published_mu_;
  WorkerQueueStatistics published_;  // under published_mu_
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_WORKER_IO_LOOP_H_
