// lib/host/ps_io_loop.h: one thread of a threaded ParameterServer: it owns
// some transport queues of the PS device and the PsShard serving exactly
// those queues; it receives gradients, hands them to the shard, and sends the
// frames the shard produces on the queue the gradient came in on.
//
// Step never blocks and reads no clock; PollingThread drives it. If the
// transport has no room for a frame after a flush and a retry, the frame is
// dropped and counted (tx_dropped): workers resend, and the PS answers a
// resend of a completed fragment with its stored parameter packet.
//
// Segmentation (ARCHITECTURE.md "Transport interface"): on a queue that
// offloads it (kernel UDP GSO, mlx5 TSO) the parameter packets of a burst are
// staged as ATP messages in one buffer, and each run of them to the same
// destination with consecutive positions and otherwise equal headers (the
// multicast of a window's results) goes out as one SegmentationJob; a run of
// one goes with the other single frames through TxBurst, in order. Other
// queues get every frame through TxBurst.
//
// Orphans: about once per millisecond of `now` (busy or idle: the polling
// thread calls Step at least every PollingOptions::max_sleep), Step runs the
// engine's orphan scan with a budget sized to the time since the last scan, so
// every slot is visited within a quarter of the orphan timeout whatever the
// polling cadence (ATP-SPEC invariant 5).
#ifndef ATP_LIB_HOST_PS_IO_LOOP_H_
#define ATP_LIB_HOST_PS_IO_LOOP_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "lib/host/polling_thread.h"
#include "lib/host/ps_shard.h"

namespace atp::host {

class PsIoLoop final : private FrameSink {
 public:
  static constexpr int kRxBurstsPerQueue = 4;

  // `queues` outlive the loop and are used only by the thread calling Step.
  PsIoLoop(std::unique_ptr<PsShard> shard, std::vector<transport::Queue*> queues,
           uint16_t base_port, uint32_t max_burst);
  ~PsIoLoop() override;

  // Step: one iteration. Its deadline: a retry of frames a queue still held,
  // and, while the shard holds partial state, the next orphan scan (so a
  // caller that sleeps until the deadline still frees orphans).
  StepResult Step(TimePoint now);

  // statistics: the last published snapshot; any thread. It is published
  // before each burst of frames is handed to a queue, so it already counts
  // every completion whose parameter packet a worker could hold.
  ParameterServerStats statistics() const;
  // Publish: snapshot now (the loop's thread, or after it stopped).
  void Publish();

  std::vector<int> wait_fds() const;
  const PsShard& shard() const { return *shard_; }

 private:
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override;
  // FrameBuffer: a buffer of the current queue's tx_pool (lent_), which
  // SendFrame stages as it is; nullptr on a queue that offloads segmentation
  // (its frames become segments) or when the pool has none to give.
  uint8_t* FrameBuffer() override;
  // AllocFrame: one buffer of the current queue's tx_pool, flushing the
  // stage (and the queue) once if it has none; false when it still has none.
  bool AllocFrame(transport::FrameRef* frame);
  // ReleaseLent: gives back a lent buffer no frame was sent in.
  void ReleaseLent();
  // FlushStage: offers the staged frames to the current queue; drops what it
  // still cannot take after a Flush and a retry.
  void FlushStage();
  // StageFrame: a copy of `frame` joins the TxBurst stage.
  void StageFrame(const uint8_t* frame);
  // Segments (queues that offload segmentation): StageSegment keeps a frame
  // for FlushSegments, which sends the runs in order (SendRun), flushing the
  // TxBurst stage before each job so that no frame overtakes another.
  void StageSegment(std::span<const uint8_t, wire::kFrameBytes> frame);
  void FlushSegments();
  void SendRun(size_t first, size_t count);

  std::unique_ptr<PsShard> shard_;
  std::vector<transport::Queue*> queues_;
  std::vector<size_t> held_;  // per queue: frames its last Flush still held
  const uint16_t base_port_;
  const size_t burst_;
  std::vector<transport::FrameRef> rx_;
  std::vector<transport::FrameRef> stage_;
  transport::FrameRef lent_;  // FrameBuffer's, until SendFrame (data null: none)
  transport::Queue* current_ = nullptr;
  // offloads_[i]: queue i offloads segmentation; current_offloads_: current_'s.
  std::vector<bool> offloads_;
  bool current_offloads_ = false;
  // handed_to_queue_: current_ took frames since Step began with it (after a
  // burst, or from a stage that filled in the middle of one): Step must Flush
  // it, since a queue may hold what it took until Flush (atp/transport.h).
  bool handed_to_queue_ = false;
  // The segment stage: per staged parameter packet its frame's first 58
  // bytes (L2-L4 and ATP header) and its ATP message (header and payload,
  // 264 bytes, back to back in segment_messages_: a job's zero-copy form),
  // and its aggregator index; segments_ of them, at most burst_.
  std::vector<std::array<uint8_t, wire::kPayloadOffset>> segment_headers_;
  std::vector<uint8_t> segment_messages_;
  std::vector<uint16_t> segment_aggregators_;
  size_t segments_ = 0;
  wire::FrameFields rx_fields_;
  wire::AtpMessage rx_message_;
  TimePoint now_;
  TimePoint next_publish_;
  TimePoint last_orphan_scan_;

  uint64_t frames_received_ = 0;
  uint64_t decode_errors_ = 0;
  uint64_t tx_dropped_ = 0;

  mutable std::mutex published_mu_;
  ParameterServerStats published_;  // under published_mu_
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_PS_IO_LOOP_H_
