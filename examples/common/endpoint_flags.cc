// examples/common/endpoint_flags.cc: the endpoint processes' common flags
// (the session contract, "Endpoint processes").
#include "examples/common/endpoint_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "examples/common/tool_flags.h"

ABSL_FLAG(std::string, address, "",
          "This node's IPv4 address. Default: a worker of rank R (rack r, index i) is "
          "10.<job>.r.(i+1); the PS is --ps_address.");
ABSL_FLAG(std::string, dpdk_port, "memif",
          "--transport=dpdk: the port toward this node's switch: 'memif' (shared memory with a "
          "switch process; --memif_*), 'af_packet' or 'af_xdp' (a kernel interface, --iface, "
          "--netns; root), 'pci' (a NIC bound to a DPDK driver, --pci).");
ABSL_FLAG(std::string, memif_socket, "",
          "--dpdk_port=memif: the memif control socket: a file path (the server creates it), or "
          "'@NAME' for an abstract socket.");
ABSL_FLAG(std::string, memif_role, "client",
          "--dpdk_port=memif: 'client' (connects to the switch's socket, retrying until the "
          "link comes up: for a worker, until its --deadline_s) or 'server' (listens on it).");
ABSL_FLAG(int, memif_id, 0, "--dpdk_port=memif: the interface id on the socket (0..255).");
ABSL_FLAG(std::string, iface, "", "--dpdk_port=af_packet|af_xdp: the kernel interface.");
ABSL_FLAG(std::string, netns, "",
          "--dpdk_port=af_packet|af_xdp: the network namespace the interface is in "
          "(/var/run/netns/NAME); empty: this process's.");
ABSL_FLAG(std::string, pci, "", "--dpdk_port=pci: the NIC's PCI address (0000:3b:00.0).");
ABSL_FLAG(int, dpdk_memory_mb, 256, "--transport=dpdk: MiB of memory for the EAL (no hugepages).");
ABSL_FLAG(std::string, udp_bind, "",
          "--transport=kernel_udp: IP:PORT this node's queue 0 binds (queue q: PORT+q).");
ABSL_FLAG(std::string, udp_gateway, "",
          "--transport=kernel_udp: IP:PORT of the ToR switch's socket (frames go there).");
ABSL_FLAG(int, job, 1, "Job id, 1..255 (addresses 10.<job>.x.y, group 239.1.0.<job>).");
ABSL_FLAG(int, racks, 2, "Racks of the job (1..32).");
ABSL_FLAG(int, workers_per_rack, 2, "Endpoint processes: workers in each rack (1..32).");
ABSL_FLAG(int, io_threads, 1,
          "I/O threads (queues) per worker, 1..16; the PS serves as many queues with as many "
          "threads. Must be equal on every node of the job.");
ABSL_FLAG(std::string, ps_address, "", "The PS's IPv4 address. Default: 10.<job>.200.1.");
ABSL_FLAG(std::string, source_check, "ipv4",
          "What a worker compares received frames' source with (the PS's address), and the PS "
          "(the workers' addresses: the defaults 10.<job>.r.(i+1)): 'ipv4', 'ipv4_mac' (the MAC "
          "too: only where nothing rewrites MACs) or 'off' (docs/security.md).");
ABSL_FLAG(std::string, group, "",
          "The job's multicast group (parameter packets). Default: 239.1.0.<job>.");

ABSL_FLAG(std::string, pcap_dir, "",
          "Record what this endpoint's device receives and sends as pcap files in this (existing) "
          "directory: <name>-rx-NNNNN.pcap and <name>-tx-NNNNN.pcap, <name> 'ps' or 'w<rank>' "
          "(docs/observability.md). Empty: no capture.");
ABSL_FLAG(int, pcap_max_file_mb, 64, "--pcap_dir: MiB per file before the next one begins.");
ABSL_FLAG(int, pcap_max_files, 4,
          "--pcap_dir: files kept per direction (the oldest is deleted).");

namespace atp::examples {

EndpointFlags EndpointFlagsFromCommandLine() {
  EndpointFlags f;
  f.transport = ResolvedTransportFlag("dpdk");
  f.address = absl::GetFlag(FLAGS_address);
  f.dpdk_port = absl::GetFlag(FLAGS_dpdk_port);
  f.memif_socket = absl::GetFlag(FLAGS_memif_socket);
  f.memif_role = absl::GetFlag(FLAGS_memif_role);
  f.memif_id = absl::GetFlag(FLAGS_memif_id);
  f.iface = absl::GetFlag(FLAGS_iface);
  f.netns = absl::GetFlag(FLAGS_netns);
  f.pci = absl::GetFlag(FLAGS_pci);
  f.dpdk_memory_mb = absl::GetFlag(FLAGS_dpdk_memory_mb);
  f.udp_bind = absl::GetFlag(FLAGS_udp_bind);
  f.udp_gateway = absl::GetFlag(FLAGS_udp_gateway);
  f.job = absl::GetFlag(FLAGS_job);
  f.racks = absl::GetFlag(FLAGS_racks);
  f.workers_per_rack = absl::GetFlag(FLAGS_workers_per_rack);
  f.io_threads = absl::GetFlag(FLAGS_io_threads);
  f.ps_address = absl::GetFlag(FLAGS_ps_address);
  f.group = absl::GetFlag(FLAGS_group);
  f.source_check = absl::GetFlag(FLAGS_source_check);
  f.pcap_dir = absl::GetFlag(FLAGS_pcap_dir);
  f.pcap_max_file_mb = absl::GetFlag(FLAGS_pcap_max_file_mb);
  f.pcap_max_files = absl::GetFlag(FLAGS_pcap_max_files);
  return f;
}

}  // namespace atp::examples
