// switch_emulator/daemon/port_rate.h: a port's egress rate (the YAML's
// `rate_mbps`): a transport::Device decorator whose queues hold what the
// switch sends in a FIFO of their own and hand it to the real port no faster
// than the configured rate, the way a switch port of that speed drains its
// egress buffer.
//
// Why: the ECN depth a switch host reads is what a queue still holds at its
// last Flush (switch_emulator/host/switch_host.h). A kernel UDP socket holds
// nothing (on loopback and veth a send is delivered, and its buffer released,
// before sendmmsg returns: SIOCOUTQ reads 0 even while the receiver drops;
// the queue that builds is the next hop's receive buffer, which the sender
// cannot read), and a memif ring holds frames only while its reader lags. A
// rate-limited port has a real egress queue at any port kind, so marking
// (and a congested bottleneck to mark on) is reproducible in a local testbed.
//
//   ATP_RETURN_IF_ERROR(LimitPortRates(config, host::MonotonicNow, devices));
//
// Each queue's Flush first hands the inner queue what the rate allows since
// the last Flush (a frame of L bytes takes L x 8 / rate; after an idle
// spell the port catches up at most kCatchUp of sending at once), then
// returns its FIFO's depth plus the inner queue's. TxBurst takes frames while
// the FIFO has room (`queue_frames`) and refuses the rest, which the switch
// host counts as tx_dropped_backpressure: a tail drop.
//
// Threads: every queue of a rate-limited device belongs to one thread (the
// switch's datapath thread): the queues share the port's transmitter.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_PORT_RATE_H_
#define ATP_SWITCH_EMULATOR_DAEMON_PORT_RATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "switch_emulator/daemon/config.h"

namespace atp::switchd {

// RateLimit: a port's egress rate and the frames its egress buffer holds.
struct RateLimit {
  uint64_t rate_mbps = 0;        // > 0: megabits per second (10^6) of whole frames
  uint32_t queue_frames = 1024;  // >= 1: frames the FIFO of each queue holds
};

class RateLimitedDevice final : public transport::Device {
 public:
  // kCatchUp: the longest spell of sending a port makes up for at once after
  // its thread was away (a sleep of the datapath thread, a preemption).
  static constexpr TimeDelta kCatchUp = TimeDelta::FromMicroseconds(1000);

  // `clock` gives now (the daemon's monotonic clock; a fake one in tests).
  RateLimitedDevice(std::unique_ptr<transport::Device> inner, RateLimit limit,
                    std::function<TimePoint()> clock);
  // Frames still in the FIFOs go back to their pools.
  ~RateLimitedDevice() override;

  std::string_view backend() const override { return inner_->backend(); }
  const transport::DeviceAddress& address() const override { return inner_->address(); }
  uint16_t base_port() const override { return inner_->base_port(); }
  uint32_t num_queues() const override { return inner_->num_queues(); }
  transport::Queue& queue(uint32_t index) override;

  transport::Device& inner() { return *inner_; }

 private:
  class PacedQueue;
  // Transmitter: the port's one wire, shared by its queues.
  struct Transmitter {
    int64_t picoseconds_per_byte = 0;
    int64_t free_at_ps = 0;  // when the last frame released has left
  };

  std::unique_ptr<transport::Device> inner_;
  std::function<TimePoint()> clock_;
  Transmitter transmitter_;
  std::vector<std::unique_ptr<PacedQueue>> queues_;
};

// LimitPortRates: wraps devices[i] (config.ports order) of every port with a
// rate_mbps. `clock` outlives the devices.
absl::Status LimitPortRates(const SwitchdConfig& config, std::function<TimePoint()> clock,
                            std::vector<std::unique_ptr<transport::Device>>& devices);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_PORT_RATE_H_
