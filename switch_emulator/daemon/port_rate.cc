#include "switch_emulator/daemon/port_rate.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace atp::switchd {
namespace {

// kReleaseBurst: frames handed to the inner queue per TxBurst.
constexpr size_t kReleaseBurst = 64;
constexpr int64_t kPicosecondsPerNanosecond = 1000;
// A byte at 1 Mb/s takes 8 us: 8 x 10^6 ps.
constexpr int64_t kPicosecondsPerByteAt1Mbps = 8'000'000;

}  // namespace

// PacedQueue: the inner queue behind a FIFO drained at the port's rate.
class RateLimitedDevice::PacedQueue final : public transport::Queue {
 public:
  PacedQueue(transport::Queue& inner, uint32_t capacity, RateLimitedDevice& device)
      : inner_(inner), device_(device), fifo_(capacity) {}

  ~PacedQueue() override {
    while (count_ > 0) {
      transport::ReleaseFrames({&fifo_[head_], 1});
      head_ = (head_ + 1) % fifo_.size();
      --count_;
    }
  }

  uint32_t index() const override { return inner_.index(); }
  const transport::QueueCapabilities& capabilities() const override { return inner_.capabilities(); }
  size_t RxBurst(std::span<transport::FrameRef> frames) override { return inner_.RxBurst(frames); }

  size_t TxBurst(std::span<const transport::FrameRef> frames) override {
    const size_t taken = std::min(frames.size(), fifo_.size() - count_);
    for (size_t i = 0; i < taken; ++i) fifo_[(head_ + count_ + i) % fifo_.size()] = frames[i];
    count_ += taken;
    return taken;
  }

  // TxSegmented: a paced port carries frames one by one (the switch host
  // sends no segmentation jobs); taking none tells a caller to send frames.
  size_t TxSegmented(const transport::SegmentationJob&) override { return 0; }

  size_t Flush() override {
    Release();
    return count_ + inner_.Flush();
  }

  transport::FramePool& rx_pool() override { return inner_.rx_pool(); }
  transport::FramePool& tx_pool() override { return inner_.tx_pool(); }
  transport::QueueStats stats() const override { return inner_.stats(); }
  int wait_fd() const override { return inner_.wait_fd(); }

 private:
  // Release: hands the inner queue the head frames the rate allows by now.
  void Release() {
    if (count_ == 0) return;
    Transmitter& wire = device_.transmitter_;
    const int64_t now_ps = device_.clock_().ToNanoseconds() * kPicosecondsPerNanosecond;
    wire.free_at_ps = std::max(
        wire.free_at_ps, now_ps - RateLimitedDevice::kCatchUp.ToNanoseconds() * kPicosecondsPerNanosecond);
    while (count_ > 0 && wire.free_at_ps <= now_ps) {
      // The frames whose transmission starts by now, at most kReleaseBurst.
      size_t k = 0;
      int64_t free_at = wire.free_at_ps;
      while (k < std::min(count_, kReleaseBurst) && free_at <= now_ps) {
        const transport::FrameRef& frame = fifo_[(head_ + k) % fifo_.size()];
        burst_[k++] = frame;
        free_at += int64_t{frame.length} * wire.picoseconds_per_byte;
      }
      const size_t taken = inner_.TxBurst({burst_.data(), k});
      for (size_t i = 0; i < taken; ++i) {
        wire.free_at_ps += int64_t{fifo_[head_].length} * wire.picoseconds_per_byte;
        head_ = (head_ + 1) % fifo_.size();
        --count_;
      }
      if (taken < k) return;  // the real port is full: the rest waits for the next Flush
    }
  }

  transport::Queue& inner_;
  RateLimitedDevice& device_;
  std::vector<transport::FrameRef> fifo_;  // a ring: count_ frames from head_
  size_t head_ = 0;
  size_t count_ = 0;
  std::array<transport::FrameRef, kReleaseBurst> burst_;
};

RateLimitedDevice::RateLimitedDevice(std::unique_ptr<transport::Device> inner, RateLimit limit,
                                     std::function<TimePoint()> clock)
    : inner_(std::move(inner)), clock_(std::move(clock)) {
  transmitter_.picoseconds_per_byte =
      std::max<int64_t>(1, kPicosecondsPerByteAt1Mbps / static_cast<int64_t>(limit.rate_mbps));
  for (uint32_t q = 0; q < inner_->num_queues(); ++q) {
    queues_.push_back(std::make_unique<PacedQueue>(inner_->queue(q), limit.queue_frames, *this));
  }
}

RateLimitedDevice::~RateLimitedDevice() {
  queues_.clear();  // their frames back to the inner pools, before the inner device goes
}

transport::Queue& RateLimitedDevice::queue(uint32_t index) { return *queues_.at(index); }

absl::Status LimitPortRates(const SwitchdConfig& config, std::function<TimePoint()> clock,
                            std::vector<std::unique_ptr<transport::Device>>& devices) {
  if (devices.size() != config.ports.size()) {
    return absl::InvalidArgumentError(absl::StrCat("LimitPortRates: ", devices.size(),
                                                   " devices for ", config.ports.size(), " ports"));
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const PortConfig& port = config.ports[i];
    if (port.rate_mbps == 0) continue;
    devices[i] = std::make_unique<RateLimitedDevice>(
        std::move(devices[i]), RateLimit{port.rate_mbps, port.queue_frames}, clock);
  }
  return absl::OkStatus();
}

}  // namespace atp::switchd
