// lib/capture/capturing_device.h: a transport::Device decorator that records
// what its queues receive and send into two PcapRings (rx and tx) before
// handing frames on; atp::CaptureDevice (atp/capture.h) builds it.
//
// Each queue keeps the inner queue's thread (atp/transport.h); the rings are
// shared by the device's queues under one mutex per direction. Sent frames
// are copied before the inner TxBurst (which may give a taken buffer back to
// its pool at once) and recorded once taken, so a frame refused by
// back-pressure and retried is recorded once.
#ifndef ATP_LIB_CAPTURE_CAPTURING_DEVICE_H_
#define ATP_LIB_CAPTURE_CAPTURING_DEVICE_H_

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "atp/transport.h"
#include "lib/capture/pcap_ring.h"

namespace atp::capture {

// Recorder: one direction's ring and its lock.
class Recorder {
 public:
  explicit Recorder(std::unique_ptr<PcapRing> ring) : ring_(std::move(ring)) {}
  // Record / RecordBytes: frames given as refs, or `count` frames of
  // `frame_bytes` back to back; all stamped now (the wall clock). The file
  // is flushed at most once a second, so a reader lags by about that.
  void Record(std::span<const transport::FrameRef> frames);
  void RecordBytes(const uint8_t* frames, size_t count, size_t frame_bytes);
  void Flush();

 private:
  void FlushEverySecond(int64_t now_ns);  // under mu_

  std::mutex mu_;
  std::unique_ptr<PcapRing> ring_;  // under mu_
  int64_t last_flush_ns_ = 0;       // under mu_
};

class CapturingDevice final : public transport::Device {
 public:
  CapturingDevice(std::unique_ptr<transport::Device> inner, std::unique_ptr<PcapRing> rx,
                  std::unique_ptr<PcapRing> tx);
  ~CapturingDevice() override;

  std::string_view backend() const override { return inner_->backend(); }
  const transport::DeviceAddress& address() const override { return inner_->address(); }
  uint16_t base_port() const override { return inner_->base_port(); }
  uint32_t num_queues() const override { return inner_->num_queues(); }
  transport::Queue& queue(uint32_t index) override;

  transport::Device& inner() { return *inner_; }

 private:
  class CapturingQueue;
  std::unique_ptr<transport::Device> inner_;
  Recorder rx_;
  Recorder tx_;
  std::vector<std::unique_ptr<CapturingQueue>> queues_;
};

}  // namespace atp::capture

#endif  // ATP_LIB_CAPTURE_CAPTURING_DEVICE_H_
