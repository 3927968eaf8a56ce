// sim/ps_node.h: a parameter server in the simulator: the product's PS host
// (lib/host/ps_io_loop.h over lib/host/ps_shard.h, what atp-ps and every
// ParameterServer thread run) behind one simulated NIC (port 0, a SimPort).
//
// The node only adapts the simulator to the host: a frame that arrives is
// delivered to the SimPort and the host steps at once; the node wakes itself
// at the deadline the step returns (the host's orphan scans while it holds
// partial state, a retry of frames the NIC still held). Decoding, CE to the
// ATP ecn bit, the multicast of parameter packets to the job's group
// (GroupIp(job)) and the orphan-scan cadence are all the host's.
//
// With a packet_service time (TopologyConfig::ps_model) the host is a single
// server: each arriving frame waits for the ones before it, then takes that
// long before the host sees it, so a PS flooded by fallbacks falls behind as
// a real one does.
#ifndef ATP_SIM_PS_NODE_H_
#define ATP_SIM_PS_NODE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "atp/parameter_server.h"
#include "lib/host/ps_io_loop.h"
#include "lib/ps/ps_config.h"
#include "lib/ps/ps_engine.h"
#include "sim/node.h"
#include "sim/ring_queue.h"
#include "sim/sim_port.h"
#include "sim/simulator.h"

namespace atp::sim {

class PsNode : public Node, public Actor {
 public:
  // Create: builds the host and its engine from `config` (the jobs it
  // serves). Parameter packets of job j go to GroupIp(j). `sim` and `pool`
  // outlive the node. Connect port 0 (the NIC) before frames arrive.
  // `packet_service` (>= 0): the host's time per received frame.
  static absl::StatusOr<std::unique_ptr<PsNode>> Create(
      std::string name, Simulator* sim, PacketPool* pool, ps::PsConfig config, uint32_t ip,
      uint16_t base_port, TimeDelta packet_service = TimeDelta::Zero());
  ~PsNode() override;

  const ps::PsEngine& engine() const { return loop_->shard().engine(); }
  // statistics: the host's counters now (frames_received: every frame that
  // reached the PS; decode_errors; frames_sent; ce_to_ecn; ...).
  ParameterServerStats statistics() const;
  uint32_t ip() const { return ip_; }

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  // Act: a step at the deadline the last one returned.
  void Act(TimePoint now) override;

 private:
  PsNode(std::string name, Simulator* sim, PacketPool* pool, uint32_t ip, uint16_t base_port,
         TimeDelta packet_service);
  void Step(TimePoint now);
  // Serve: hands the host every waiting frame whose service ended by `now`.
  void Serve(TimePoint now);

  Simulator* sim_;
  uint32_t ip_;
  PacketFramePool frames_;  // the NIC's pools
  SimPort nic_;
  std::unique_ptr<host::PsIoLoop> loop_;
  // The single server (packet_service_ > 0): frames waiting, and when the
  // one at their head is done.
  TimeDelta packet_service_;
  RingQueue<PacketPtr> waiting_;
  TimePoint head_done_ = TimePoint::Infinite();
};

}  // namespace atp::sim

#endif  // ATP_SIM_PS_NODE_H_
