// testbed/switch_fabric.h: ATP switches inside an in-process
// LoopbackWire: switch hosts (switch_emulator/host/switch_host.h, what
// atp-switchd runs) as the wire's frame processor, for tests, examples and
// benchmarks that run workers and parameter servers as threads of one
// process.
//
//   SwitchFabricOptions options;
//   options.aggregation = FabricAggregation::kTwoLevel;
//   options.jobs.push_back({.job_id = 7, .group = group_ip, .racks = {{w0, w1}, {w2, w3}}});
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<SwitchFabric> fabric, SwitchFabric::Create(options));
//   auto wire = transport::LoopbackWire::Create({.processor = fabric.get()});
//
// Topology: physical rack r holds rack r of every job, with its ToR switch
// aggregating level 1 for those jobs; the parameter servers sit in one more
// rack whose ToR aggregates level 2 (kTwoLevel). kSingleSwitch is one switch
// for everyone, aggregating both levels (a level-1 completion feeds level 2
// inside it). kNone aggregates nothing (the PS does all the work) but still
// replicates parameter packets to the job's workers like a multicast router.
//
// Paths: a gradient goes worker -> ToR(rack) -> ToR(PS rack) -> its
// destination (routed by IPv4); a parameter packet (destination: a job's
// group) goes PS -> ToR(PS rack) -> ToR(each rack) -> each worker. Each
// switch is a SwitchHost whose ports are fabric ports: one per worker of its
// rack, one per link to another switch, one toward the parameter servers
// (the wire routes from there). The wire hands the fabric a run of frames
// entering it (ProcessBurst: one sender's, in order); each goes into its
// first switch's port, then every port holding frames is polled (PollQueue,
// queue 0: the whole inbox as the host's bursts), breadth first, until every
// copy has left the fabric; routing, multicast, ECN marking and drops are
// the host's. A copy leaving toward a worker or the parameter servers goes
// straight to the wire's output. Frames of one sender reach each receiver in
// the order sent (each port is a FIFO, and they all take the same path).
// Every hop of every copy can lose the frame (loss_rate, deterministic
// seed). The ECN depth of a port is the receive backlog of the queue the
// frame is bound for (a worker's, or its final destination's beyond another
// switch); frames of the same run still inside the fabric are not in it.
//
// Thread safety: ProcessBurst runs under the wire's lock; the fabric also
// keeps its own lock, held from BeginBurst to EndBurst, so stats() and
// WipeSwitches() may be called from any thread.
#ifndef ATP_TESTBED_SWITCH_FABRIC_H_
#define ATP_TESTBED_SWITCH_FABRIC_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/transport/frame_pool.h"
#include "atp/transport/loopback.h"
#include "atp/wire.h"
#include "switch_emulator/host/switch_host.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "switch_emulator/pipeline/pipeline_config.h"

namespace atp::testbed {

// kForwardOnly: the switches of kTwoLevel aggregating no job: they route,
// replicate parameter packets and mark CE past the ECN threshold, as
// atp-switchd does for jobs it does not aggregate.
enum class FabricAggregation : uint8_t { kNone, kSingleSwitch, kTwoLevel, kForwardOnly };

// FabricJob: one job's addresses.
struct FabricJob {
  uint8_t job_id = 0;
  wire::Ipv4Address group;                            // its parameter packets' destination
  std::vector<std::vector<wire::Ipv4Address>> racks;  // racks[r]: rack r's workers, in order
};

struct SwitchFabricOptions {
  FabricAggregation aggregation = FabricAggregation::kTwoLevel;
  std::vector<FabricJob> jobs;
  size_t aggregator_count = switch_emulator::kDefaultAggregatorCount;  // per switch
  uint32_t ecn_threshold = 256;    // frames waiting at the destination queue
  TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(10);
  double loss_rate = 0.0;          // per hop and copy, in [0, 1)
  uint64_t seed = 1;
  // wipe_every_frames: if > 0, every switch loses all its state (as after a
  // reboot) each time this many more frames have entered the fabric.
  uint64_t wipe_every_frames = 0;
  uint16_t base_port = wire::kDefaultBasePort;
};

// FabricStats: a snapshot.
struct FabricStats {
  uint64_t frames = 0;        // frames the wire handed to the fabric
  uint64_t lost = 0;          // copies dropped by loss_rate
  uint64_t absorbed = 0;      // frames that entered a switch and of which no copy left the
                              // fabric (gradients aggregated or duplicate, copies all lost)
  uint64_t malformed = 0;     // frames a switch rejected
  uint64_t multicast = 0;     // parameter packets replicated to workers
  uint64_t wipes = 0;         // times every switch lost its state
  uint64_t filtered = 0;      // copies toward workers the delivery filter dropped
  std::vector<switch_emulator::PipelineCounters> switches;  // ToR 0..racks-1, then the PS rack's
};

class SwitchFabric final : public transport::FrameProcessor {
 public:
  static absl::StatusOr<std::unique_ptr<SwitchFabric>> Create(const SwitchFabricOptions& options);
  ~SwitchFabric() override;

  // ProcessBurst: between BeginBurst and EndBurst, which hold the fabric's
  // lock for the whole run of bursts. Every frame has left the fabric (or
  // been consumed) when it returns.
  void ProcessBurst(std::span<const transport::BurstFrame> frames, TimePoint now,
                    const transport::LoopbackWire& wire, transport::WireOutput& output) override;
  // Process: one frame, as a burst of one, for a caller that wants a
  // decision (the wire calls ProcessBurst): the bytes of the first copy that
  // left replace the frame's, and every endpoint it left toward gets them.
  transport::WireDecision Process(std::span<uint8_t, transport::kFrameBytes> frame,
                                  transport::EndpointId from, TimePoint now,
                                  const transport::LoopbackWire& wire) override;
  void BeginBurst() override { mu_.lock(); }
  void EndBurst() override { mu_.unlock(); }

  FabricStats stats() const;
  // WipeSwitches: every switch loses all its aggregators, as after a reboot.
  void WipeSwitches();
  // SetLossRate: any thread.
  void SetLossRate(double loss_rate);
  // DeliveryFilter: called for every copy of a frame about to leave the
  // fabric toward worker `to`, with the frame's ATP header; false drops that
  // copy (counted in `filtered`). Fault injection for tests: it runs under
  // the fabric's lock, on whichever thread runs the processor, and must not
  // call back into the fabric or the wire.
  using DeliveryFilter = std::function<bool(wire::Ipv4Address to, const wire::AtpHeader& header)>;
  // SetDeliveryFilter: any thread; an empty filter delivers everything.
  void SetDeliveryFilter(DeliveryFilter filter);

 private:
  class Port;
  class BorrowedPool;
  class CopyPool;
  class DepthProbe;
  class DecisionOutput;
  struct Switch {
    std::unique_ptr<DepthProbe> depth;  // before the host, which holds a pointer to it
    std::unique_ptr<switchd::SwitchHost> host;
    std::vector<std::unique_ptr<Port>> ports;
  };
  // Arrival: a port of switch `sw` whose inbox has frames for that host's poll.
  struct Arrival {
    uint32_t sw;
    uint32_t port;
  };
  // Fate: what became of an entering frame of the current burst.
  enum class Fate : uint8_t {
    kOutside,  // never entered a switch (lost on the way in, routed around them)
    kInside,   // entered a switch, no copy has left the fabric yet
    kLeft,     // a copy left toward a worker or the parameter servers
  };

  explicit SwitchFabric(const SwitchFabricOptions& options);
  absl::Status Build();
  // AddSwitch: a switch aggregating `jobs` (its ports come later).
  absl::Status AddSwitch(std::vector<switch_emulator::JobConfig> jobs);
  uint32_t AddPort(uint32_t sw, std::string name);
  void Link(uint32_t a, uint32_t b, uint32_t* a_port, uint32_t* b_port);

  // UseWire: `wire` is the one the fabric works for now; endpoint ids are
  // per wire, so a new one empties what was cached.
  void UseWire(const transport::LoopbackWire& wire);
  // Enter: entering frame `index` of the burst: lost, passed around the
  // switches, or put in its first switch's port.
  void Enter(uint8_t* frame, uint32_t index, TimePoint now);
  // Entrance: where an ATP frame enters the fabric.
  struct Entrance {
    enum class Kind : uint8_t {
      kGroup,      // a parameter packet (to a job's group): the PS rack's switch
      kWorker,     // from a worker: its ToR
      kElsewhere,  // anything else: routed around the switches
    };
    Kind kind = Kind::kElsewhere;
    uint32_t sw = 0;  // kGroup, kWorker: the switch and its port the frame enters
    uint32_t port = 0;
    const std::vector<std::vector<wire::Ipv4Address>>* racks = nullptr;  // kGroup: its workers
  };
  // EntranceOf: the Entrance of a frame from `src` to `dst` (host order).
  // The last answer is kept: a run of frames is one sender's, mostly to one
  // destination, and the tables do not change once built.
  const Entrance& EntranceOf(uint32_t src, uint32_t dst);
  // MulticastWithoutSwitches: kNone: a parameter packet to its job's workers.
  void MulticastWithoutSwitches(const std::vector<std::vector<wire::Ipv4Address>>& racks,
                                const uint8_t* frame);
  // Pass: a frame the switches do not see, routed by the wire, after what is
  // still inside the fabric (which may be of the same sender).
  void Pass(const uint8_t* frame, TimePoint now);
  // Arrive: `frame` into port `port` of switch `sw`, for that host's poll.
  void Arrive(uint32_t sw, uint32_t port, const transport::FrameRef& frame);
  // Drain: polls every port that has frames, breadth first, until none has.
  void Drain(TimePoint now);
  // Lose: whether loss_rate takes this copy (counted); inline for the
  // common case of no loss at all.
  bool Lose() { return loss_threshold_ != 0 && Draw(); }
  bool Draw();
  // Filtered: the delivery filter drops the copy of `frame` to `to`.
  bool Filtered(wire::Ipv4Address to, const uint8_t* frame);
  // Sent: what a port's TxBurst does with a frame (called by Port); then
  // ReleaseSent once per TxBurst: the copies done with go back to their pool.
  void Sent(const Port& port, const transport::FrameRef& frame);
  void ReleaseSent();
  // Left: a copy of `frame`'s entering frame has left the fabric.
  void Left(const transport::FrameRef& frame);
  // OriginOf: the index in the burst of the entering frame `frame` is, or is
  // a copy of.
  uint32_t OriginOf(const transport::FrameRef& frame) const;
  // Depth: the ECN depth of `port`'s queue `queue` toward where `frame` goes
  // (called by the port's host, through its DepthProbe).
  uint32_t Depth(const Port& port, uint32_t queue, const transport::FrameRef& frame);
  // EndpointFor: the wire's endpoint owning `ipv4` (host order), through
  // endpoint_cache_: the wire's lookup is a hash probe behind a virtual call,
  // and every copy of every frame needs one or two.
  // kNoEndpoint when there is none (not std::optional: GCC 12 builds one on
  // the stack as two stores and reloads it as one load, a store-forwarding
  // stall on every copy of every frame).
  static constexpr transport::EndpointId kNoEndpoint = ~transport::EndpointId{0};
  transport::EndpointId EndpointFor(uint32_t ipv4) const;
  // EndpointOf: EndpointFor a kEndpoint port's node, kept in the port.
  transport::EndpointId EndpointOf(const Port& port) const;

  const SwitchFabricOptions options_;
  mutable std::mutex mu_;
  std::vector<Switch> switches_;                              // under mu_
  // group_racks_: a job's group ip -> its racks' workers (racks[r]).
  absl::flat_hash_map<uint32_t, std::vector<std::vector<wire::Ipv4Address>>> group_racks_;
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint32_t>> worker_port_;  // ip -> (switch, port)
  uint32_t ps_switch_ = 0;                                    // where frames leave for the PS
  uint32_t ps_port_ = 0;
  std::unique_ptr<BorrowedPool> borrowed_;                    // the wire's frames
  std::unique_ptr<transport::HeapFramePool> copies_;          // multicast copies
  std::unique_ptr<CopyPool> copy_pool_;                       // copies_, tagging each copy
  // Per ProcessBurst call (under mu_):
  const transport::LoopbackWire* wire_ = nullptr;
  transport::WireOutput* output_ = nullptr;   // the wire's, during the call
  std::vector<Arrival> pending_;              // ports with frames, in order
  std::vector<transport::FrameRef> release_;  // copies done with, per TxBurst
  std::vector<Fate> fates_;                   // [index in the burst]
  // copy_origin_: [copy's handle in copies_]: the entering frame it copies.
  std::vector<uint32_t> copy_origin_;
  std::vector<transport::EndpointId> decision_endpoints_;  // Process's kSendTo storage
  Entrance entrance_;  // EntranceOf's last answer, for entrance_key_ (src << 32 | dst)
  uint64_t entrance_key_ = 0;
  bool entrance_valid_ = false;
  uint32_t in_hand_ = 0;      // OriginOf the frame a host handles now (DepthProbe::Handling)
  uint64_t entry_drops_ = 0;  // entering frames lost before a switch, this burst
  uint64_t rng_;                                              // under mu_
  uint64_t loss_threshold_;                                   // under mu_
  FabricStats counters_;                                      // under mu_ (switches unused)
  DeliveryFilter filter_;                                     // under mu_
  // endpoint_cache_: EndpointFor's direct-mapped cache of found endpoints.
  struct CachedEndpoint {
    uint32_t ipv4 = 0;
    transport::EndpointId endpoint = 0;
    bool valid = false;
  };
  static constexpr int kEndpointCacheBits = 6;
  mutable std::array<CachedEndpoint, size_t{1} << kEndpointCacheBits>
      endpoint_cache_{};  // under mu_
};

}  // namespace atp::testbed

#endif  // ATP_TESTBED_SWITCH_FABRIC_H_
