// sim/packet_filter.h: the interface of the impairments a Link applies to
// the frames it carries (loss, bursts, reordering, duplication, corruption,
// blackholes: see loss_filters.h and mangling_filters.h).
//
// A Link runs its filters, in the order they were added, on every frame as the
// frame goes onto the wire. Each filter may drop the frame (it still uses the
// link's time: it was lost on the wire), add copies, delay it or rewrite its
// bytes. Every filter draws from its own seeded Random, so the same seed gives
// the same impairments.
//
//   link->AddFilter(std::make_unique<atp::sim::RandomLossFilter>(0.01, seed));
#ifndef ATP_SIM_PACKET_FILTER_H_
#define ATP_SIM_PACKET_FILTER_H_

#include <cstdint>
#include <string_view>

#include "atp/time.h"
#include "sim/packet.h"
#include "lib/wire/frame_view.h"

namespace atp::sim {

// TrafficClass: which frames a filter acts on; the others pass untouched.
enum class TrafficClass : uint8_t {
  kAll,
  kGradients,         // ATP frames without the `ack` flag (workers toward the PS)
  kParameterPackets,  // ATP frames with the `ack` flag (the PS toward workers)
};

// ClassOf: the class of a frame, read from its ATP flags without validation
// (a corrupted frame is classified by whatever its bytes say).
inline TrafficClass ClassOf(const Packet& packet) {
  // The flag word sits at ATP header offset 12 (big-endian); `ack` is in
  // its low byte.
  constexpr uint8_t kAckBit = wire::FrameView::kAck;
  static_assert(kAckBit == wire::FrameView::kAck, "ack is in the low byte of the flag word");
  const uint8_t flags_low = packet.bytes[wire::kAtpOffset + 13];
  return (flags_low & kAckBit) != 0 ? TrafficClass::kParameterPackets : TrafficClass::kGradients;
}

// FilterOutcome: what the filters decided for one frame. Starts as "deliver one
// copy, on time"; each filter may only make it worse.
struct FilterOutcome {
  bool dropped = false;        // lost on the wire: not delivered
  uint32_t extra_copies = 0;   // duplicates delivered with the frame
  TimeDelta extra_delay;       // added to the propagation delay (reordering)
};

// PacketFilter: one impairment. Owned by the Link it is attached to.
class PacketFilter {
 public:
  explicit PacketFilter(TrafficClass traffic) : traffic_(traffic) {}
  virtual ~PacketFilter() = default;

  // Filter: called by the Link for each frame of the selected class that no
  // earlier filter dropped; `wire_time` is when its serialization starts.
  // May rewrite `packet`'s bytes and update `outcome`.
  void Filter(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) {
    if (traffic_ != TrafficClass::kAll && ClassOf(packet) != traffic_) return;
    Apply(packet, wire_time, outcome);
  }

  // name: for logs and reports ("random_loss").
  virtual std::string_view name() const = 0;
  // affected: frames this filter dropped, copied, delayed or rewrote.
  uint64_t affected() const { return affected_; }

 protected:
  virtual void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) = 0;
  void CountAffected() { ++affected_; }

 private:
  TrafficClass traffic_;
  uint64_t affected_ = 0;
};

}  // namespace atp::sim

#endif  // ATP_SIM_PACKET_FILTER_H_
