// sim/link.h: a one-way link: an egress queue with tail drop, a
// transmitter of fixed bandwidth, a propagation delay, and the packet filters
// attached to it. A cable between two nodes is two Links.
//
// Timing: frames are serialized one after another at `bandwidth_bps`
// (306 bytes plus framing overhead each), then arrive `propagation_delay`
// later (plus any delay a filter adds). The egress queue holds at most
// `queue_capacity_packets` frames, the one being serialized included; a frame
// sent to a full queue is dropped (tail drop). QueueDepth() is what a switch
// compares with its ECN threshold.
//
// A link between two partitions of a network (network.h: each partition
// has its own Simulator and pool, run by its own thread) is built with
// the receiver's Simulator and pool as well: Send, on the sender's thread,
// only queues and timestamps frames; Cross, called while neither partition
// runs, copies them into the receiver's pool and schedules their arrival.
// The propagation delay is what lets the two run apart: a frame sent at t
// arrives at t + serialization + delay, after the window both were running.
//
//   Link link(&sim, &pool, LinkConfig{.bandwidth_bps = 100e9});
//   link.Connect(&switch_node, /*port=*/3);
//   link.Send(std::move(packet));
#ifndef ATP_SIM_LINK_H_
#define ATP_SIM_LINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atp/time.h"
#include "sim/packet.h"
#include "sim/packet_filter.h"
#include "sim/ring_queue.h"
#include "sim/simulator.h"

namespace atp::sim {

// PacketReceiver: a node's receive side. Links call Receive when a frame
// arrives; the receiver owns the packet from then on.
class PacketReceiver {
 public:
  virtual ~PacketReceiver() = default;
  // Receive: `port` is the receiver's port index the link was connected with.
  virtual void Receive(PacketPtr packet, int port, TimePoint now) = 0;
};

struct LinkConfig {
  double bandwidth_bps = 100e9;
  TimeDelta propagation_delay = TimeDelta::FromMicroseconds(1);
  // Frames in the egress queue, the one on the wire included. At least 1.
  uint32_t queue_capacity_packets = 1024;
  // Bytes a frame costs beyond its 306: preamble and SFD (8), FCS (4),
  // inter-frame gap (12). A 306-byte frame takes 330 bytes of the link.
  uint32_t framing_overhead_bytes = 24;
};

struct LinkCounters {
  uint64_t sent = 0;          // frames accepted into the queue
  uint64_t tail_drops = 0;    // frames refused by a full queue
  uint64_t filter_drops = 0;  // frames a filter lost on the wire
  uint64_t duplicates = 0;    // extra copies a filter added
  uint64_t delivered = 0;     // frames handed to the receiver (copies included)
  uint32_t max_depth = 0;     // the deepest the queue has been, in frames
};

// SendResult: what Link::Send did with a frame.
enum class SendResult : uint8_t { kQueued, kTailDropped };

class Link : public Actor {
 public:
  // `sim` and `pool` must outlive the link.
  Link(Simulator* sim, PacketPool* pool, const LinkConfig& config, std::string name);
  // A link into another partition: the sender's `sim` and `pool`, the
  // receiver's `rx_sim` and `rx_pool` (all outlive the link).
  Link(Simulator* sim, PacketPool* pool, Simulator* rx_sim, PacketPool* rx_pool,
       const LinkConfig& config, std::string name);
  ~Link() override;

  // crosses_partitions: built with a receiver's Simulator of its own.
  bool crosses_partitions() const { return rx_sim_ != sim_; }
  // Cross: hands the frames sent since the last call to the receiver's side
  // (a no-op for a link within a partition). Neither partition may run.
  void Cross();

  // Connect: where frames arrive. Must be called before the first Send.
  void Connect(PacketReceiver* receiver, int port);

  // AddFilter: appends a filter to the chain the link applies on the wire.
  // Returns the filter (owned by the link) so callers can read its counters.
  PacketFilter* AddFilter(std::unique_ptr<PacketFilter> filter);

  // Send: queues `packet` for transmission at Now(), or drops it if the queue
  // is full. Takes ownership either way.
  SendResult Send(PacketPtr packet);

  // QueueDepth: frames queued or on the wire at Now() (0..capacity).
  uint32_t QueueDepth() const;
  // FreeSlots: capacity - QueueDepth().
  uint32_t FreeSlots() const { return config_.queue_capacity_packets - QueueDepth(); }
  // TimeWhenDepthAtMost: the earliest time (>= Now()) at which QueueDepth()
  // will be at most `depth` if nothing else is sent.
  TimePoint TimeWhenDepthAtMost(uint32_t depth) const;

  const LinkConfig& config() const { return config_; }
  const LinkCounters& counters() const { return counters_; }
  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<PacketFilter>>& filters() const { return filters_; }
  // serialization_time: how long one frame occupies the transmitter.
  TimeDelta serialization_time() const;

  void Act(TimePoint now) override;

 private:
  struct InFlight {
    PacketPtr packet;
    int64_t arrival_ns = 0;
  };
  struct Delayed {
    int64_t arrival_ns;
    uint64_t order;  // tie breaker among delayed frames
    Packet* packet;  // owned (released into a PacketPtr on delivery)
  };

  // Arrive: puts a sent frame on its way to arrive at `arrival_ns`.
  void Arrive(PacketPtr packet, int64_t arrival_ns, bool delayed);
  void PushDelayed(PacketPtr packet, int64_t arrival_ns);
  PacketPtr PopDelayed();
  void ScheduleNext();

  // The sender's clock and pool (the queue, filters, duplicates) and the
  // receiver's (arrivals, Act); the same ones within a partition.
  Simulator* sim_;
  PacketPool* pool_;
  Simulator* rx_sim_;
  PacketPool* rx_pool_;
  LinkConfig config_;
  std::string name_;
  PacketReceiver* receiver_ = nullptr;
  int receiver_port_ = 0;
  std::vector<std::unique_ptr<PacketFilter>> filters_;

  int64_t serialization_ps_;   // per frame, picoseconds
  int64_t busy_until_ps_ = 0;  // when the transmitter finishes the last queued frame
  RingQueue<InFlight> in_flight_;   // arrival order == send order
  std::vector<Delayed> delayed_;    // min-heap: frames a filter delayed
  uint64_t delayed_order_ = 0;
  // crossing_: frames sent into another partition and not yet handed over
  // by Cross, in send order (delayed: whether a filter delayed them).
  struct Crossing {
    PacketPtr packet;
    int64_t arrival_ns;
    bool delayed;
  };
  std::vector<Crossing> crossing_;
  LinkCounters counters_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_LINK_H_
