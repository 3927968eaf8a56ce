// testbed/reflector_queue.h: a transport Queue that answers
// instantly: every gradient frame sent on it comes back on its own receive
// side as the parameter packet of a one-worker job (the same frame with
// `ack` set: its payload is already that job's sum). For unit tests and the
// host-stack benchmark, where the network and the PS must cost nothing.
//
//   ReflectorQueue queue(/*index=*/0, ReflectorQueue::Mode::kReflect);
//   WorkerIoLoop loop(..., queue);        // a job of 1 rack x 1 worker
//   loop.Step(now);                        // sends; the answers wait on the RX side
//
// Mode kHold keeps the sent frames instead; ReleaseHeld() turns them into
// answers later (so the send and receive halves can be timed apart), and
// held() lets a test inspect them. Frames for the RX side come from its own
// pool; the ring holds at most `capacity` frames (TxBurst takes fewer when
// full); kHold keeps up to `capacity` frames without allocating. Not
// thread-safe, like every Queue.
//
// `tx_segmentation` is what the queue declares in its capabilities: with
// kKernelGso or kHardwareTso it stands for a queue that offloads
// segmentation (up to 64 segments per job), so a sender takes its offload
// path; the segments are still turned into frames here, one by one, and
// counted as offloaded.
#ifndef ATP_TESTBED_REFLECTOR_QUEUE_H_
#define ATP_TESTBED_REFLECTOR_QUEUE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "atp/wire.h"

namespace atp::testbed {

class ReflectorQueue final : public transport::Queue {
 public:
  enum class Mode : uint8_t {
    kReflect,  // every sent frame comes back as its parameter packet
    kHold,     // sent frames are kept (held()) until ReleaseHeld()
    kDiscard,  // sent frames are counted (discarded()) and dropped: only the
               // sender's cost remains (the last one is kept: last_discarded())
  };

  ReflectorQueue(uint32_t index, Mode mode, uint32_t capacity = 4096,
                 transport::TxSegmentation tx_segmentation = transport::TxSegmentation::kSoftware);
  ~ReflectorQueue() override;

  uint32_t index() const override { return index_; }
  const transport::QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<transport::FrameRef> frames) override;
  size_t TxBurst(std::span<const transport::FrameRef> frames) override;
  size_t TxSegmented(const transport::SegmentationJob& job) override;
  size_t Flush() override { return 0; }
  transport::FramePool& rx_pool() override { return *rx_pool_; }
  transport::FramePool& tx_pool() override { return *tx_pool_; }
  transport::QueueStats stats() const override { return stats_; }

  // ReleaseHeld: kHold: the held frames become answers on the RX side, in
  // order; returns how many.
  size_t ReleaseHeld();
  // InjectRx: puts a copy of `frame` on the RX side (a test's own answer).
  bool InjectRx(std::span<const uint8_t> frame);
  using Frame = std::array<uint8_t, wire::kFrameBytes>;
  // held: kHold: the frames sent and not yet released, oldest first.
  std::span<const Frame> held() const { return std::span<const Frame>(held_).subspan(held_head_); }
  size_t rx_waiting() const { return rx_.size(); }
  // discarded / last_discarded: kDiscard: frames dropped, and the last one.
  uint64_t discarded() const { return discarded_; }
  const Frame& last_discarded() const { return last_discarded_; }
  // OnTransmit: `hook` runs as each TxBurst or TxSegmented begins, before the
  // frames are taken: a test looks at the sender's state at the moment its
  // frames leave.
  void OnTransmit(std::function<void()> hook) { on_transmit_ = std::move(hook); }

 private:
  bool Answer(const uint8_t* frame);
  bool Hold(const uint8_t* frame);

  const uint32_t index_;
  const Mode mode_;
  const size_t capacity_;
  transport::QueueCapabilities capabilities_;
  std::unique_ptr<transport::HeapFramePool> rx_pool_;
  std::unique_ptr<transport::HeapFramePool> tx_pool_;
  std::deque<transport::FrameRef> rx_;
  std::vector<Frame> held_;  // [held_head_, end): held; capacity reserved up front
  size_t held_head_ = 0;
  uint64_t discarded_ = 0;
  Frame last_discarded_{};
  std::function<void()> on_transmit_;
  transport::QueueStats stats_;
};

}  // namespace atp::testbed

#endif  // ATP_TESTBED_REFLECTOR_QUEUE_H_
