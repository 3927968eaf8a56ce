// sim/ps_node.h: a parameter-server host: the real PsEngine behind one
// NIC (port 0). Gradients that arrive are decoded and handed to the engine;
// the parameter packets it emits are multicast to the job's group address.
// A gradient that arrives with IPv4 CE (marked by a switch that does not
// speak ATP) is handed over with the ATP `ecn` flag set, so congestion seen
// anywhere on the way up reaches every worker in the parameter packet.
// While the engine holds partial state it also scans for orphans (state of
// dead or aborted jobs, PsConfig::orphan_timeout) every quarter of the orphan
// timeout, as the runtime PS's idle loop does, so that it is freed even when
// no more frames arrive.
#ifndef ATP_SIM_PS_NODE_H_
#define ATP_SIM_PS_NODE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "atp/wire.h"
#include "lib/protocol/message_sink.h"
#include "lib/ps/ps_engine.h"
#include "sim/node.h"
#include "sim/simulator.h"

namespace atp::sim {

struct PsNodeCounters {
  uint64_t frames_received = 0;  // every frame that reached the PS ("frames into the PS")
  uint64_t decode_errors = 0;    // frames DecodeFrame rejected
  uint64_t frames_sent = 0;      // parameter packets and overflow requests
  uint64_t ce_to_ecn = 0;        // gradients whose CE mark became the `ecn` flag
  uint64_t orphan_scans = 0;     // idle orphan scans run
};

class PsNode : public Node, public Actor {
 public:
  // Create: builds the engine from `config` (the jobs it serves). Parameter
  // packets of job j go to GroupIp(j). `sim` and `pool` outlive the node.
  static absl::StatusOr<std::unique_ptr<PsNode>> Create(std::string name, Simulator* sim,
                                                        PacketPool* pool, ps::PsConfig config,
                                                        uint32_t ip, uint16_t base_port);
  ~PsNode() override;

  const ps::PsEngine& engine() const { return engine_; }
  const PsNodeCounters& counters() const { return counters_; }
  uint32_t ip() const { return ip_; }

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  // Act: the periodic orphan scan (a full pass).
  void Act(TimePoint now) override;

 private:
  // Sink: encodes the engine's messages into frames on the NIC.
  class Sink : public protocol::MessageSink {
   public:
    explicit Sink(PsNode* node) : node_(node) {}
    void Send(const wire::AtpMessage& message) override;

   private:
    PsNode* node_;
  };

  PsNode(std::string name, Simulator* sim, PacketPool* pool, ps::PsEngine engine,
         TimeDelta scan_period, uint32_t ip, uint16_t base_port);
  void MaybeScheduleScan(TimePoint now);

  Simulator* sim_;
  PacketPool* pool_;
  ps::PsEngine engine_;
  uint32_t ip_;
  uint16_t base_port_;
  TimeDelta scan_period_;
  Sink sink_{this};
  wire::FrameFields tx_fields_;
  wire::FrameFields rx_fields_;
  wire::AtpMessage rx_message_;
  PsNodeCounters counters_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_PS_NODE_H_
