// switch_emulator/daemon/ports.h: opens the transport devices a switchd
// configuration names: DPDK ports (memif, af_packet, af_xdp, pci) through one
// EAL for all of them, and kernel UDP overlay ports (whole frames as
// datagrams).
//
//   ATP_ASSIGN_OR_RETURN(OpenedPorts ports, OpenPorts(config));
//   ... SwitchDaemon over ports.devices (config order) ...
//
// DPDK ports are switch ports: promiscuous, sending any whole ATP frame
// (DpdkDestinations::kAny), each a vdev created at open and removed at close
// (a NIC is probed from the EAL's PCI allow-list). A memif server port removes
// a stale socket file left by a dead process (and refuses one a live process
// listens on); once every port is open, startup waits up to
// SwitchdConfig::link_timeout for each memif client port's link. A memif
// client port whose server goes away reconnects by itself (every 200 ms,
// from the datapath thread) once the server is back.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_PORTS_H_
#define ATP_SWITCH_EMULATOR_DAEMON_PORTS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"
#include "switch_emulator/daemon/config.h"

namespace atp::switchd {

struct OpenedPorts {
  std::vector<std::unique_ptr<transport::Device>> devices;  // config.ports order
  bool dpdk = false;  // the EAL is up: the datapath thread registers as an lcore
};

// OpenPorts: every port of `config`, or the first failure as
// "port '<name>' (<type>, line N): <why>". Control path; call once.
absl::StatusOr<OpenedPorts> OpenPorts(const SwitchdConfig& config);

// DpdkThreadHooks: what the datapath thread runs at its start and end when
// DPDK ports are open (lcore registration); no-ops without DPDK.
std::function<void()> DpdkThreadStartHook();
std::function<void()> DpdkThreadStopHook();

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_PORTS_H_
