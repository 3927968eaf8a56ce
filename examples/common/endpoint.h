// examples/common/endpoint.h: one endpoint of a job (a worker or the
// parameter server) as its own OS process over a real transport: the common
// flags of the endpoint tools (atp-ps, atp-throughput --role=worker) turned
// into TransportOptions and JobOptions, and the device opened and brought up.
//
//   EndpointFlags flags = EndpointFlagsFromCommandLine();      // endpoint_flags.cc
//   absl::StatusOr<EndpointSpec> spec =
//       BuildEndpoint(flags, {.role = EndpointRole::kWorker, .rank = 3});
//   if (!spec.ok()) { print spec.status(); return kBadFlagsExit; }   // names the flag
//   StopSignals stop;                                          // before any thread starts
//   ATP_ASSIGN_OR_RETURN(auto device, OpenEndpointDevice(*spec, deadline, stop));
//
// Addresses (as testbed/local_cluster.h and the testbed): worker
// (rack r, index i) of job j is 10.j.r.(i+1), the PS 10.j.200.1, the group
// 239.1.0.j (MAC 01:00:5e:01:00:j); MACs are transport::DefaultMacFor(ip).
//
// The DPDK device of an endpoint has one port toward its ToR switch (a memif
// client by default) and knows, as peers for DpdkDestinations::kKnownPeers,
// the PS (worker side) or the job's group (PS side, multicast delivery) or
// every worker (PS side, unicast delivery: a direct link, no switch).
#ifndef ATP_EXAMPLES_COMMON_ENDPOINT_H_
#define ATP_EXAMPLES_COMMON_ENDPOINT_H_

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "atp/options.h"
#include "atp/transport.h"
#include "atp/transport_factory.h"
#include "nlohmann/json.hpp"

namespace atp::examples {

// EndpointFlags: the common flags' values (see endpoint_flags.cc for their
// documentation); plain data, so that BuildEndpoint can be tested without
// a command line. Empty strings mean "derived" where a default is described.
struct EndpointFlags {
  std::string transport = "dpdk";  // dpdk | kernel_udp
  std::string address;             // this node; "" = from the role, job and rank
  // DPDK.
  std::string dpdk_port = "memif";  // memif | af_packet | af_xdp | pci
  std::string memif_socket;         // a file path, or "@name" for an abstract socket
  std::string memif_role = "client";
  int memif_id = 0;
  std::string iface;
  std::string netns;
  std::string pci;
  int dpdk_memory_mb = 256;
  // Kernel UDP overlay.
  std::string udp_bind;
  std::string udp_gateway;
  // Job.
  int job = 1;
  int racks = 2;
  int workers_per_rack = 2;
  int io_threads = 1;
  std::string ps_address;  // "" = 10.<job>.200.1
  std::string group;       // "" = 239.1.0.<job>
  // source_check: ipv4 | ipv4_mac | off (docs/security.md).
  std::string source_check = "ipv4";
  // Capture (atp/capture.h): "" = off.
  std::string pcap_dir;
  int pcap_max_file_mb = 64;
  int pcap_max_files = 4;
};

enum class EndpointRole : uint8_t { kWorker, kParameterServer };

// EndpointPlace: which endpoint of the job this process is.
struct EndpointPlace {
  EndpointRole role = EndpointRole::kWorker;
  int rank = -1;  // workers: rack-major rank, 0..racks*workers_per_rack-1
  ParameterDelivery delivery = ParameterDelivery::kMulticast;  // PS only
  std::string program_name = "atp-endpoint";  // the DPDK EAL's program name
};

// EndpointSpec: everything an endpoint process needs.
struct EndpointSpec {
  EndpointPlace place;
  JobOptions job;  // job_id, layout, io_threads (retransmission timers: defaults)
  int rack = 0;            // workers
  int worker_in_rack = 0;  // workers
  transport::DeviceAddress self;
  transport::DeviceAddress ps;
  transport::DeviceAddress group;
  std::vector<transport::DeviceAddress> workers;  // rack-major
  // source_check: a worker accepts frames only from `ps`, the PS only from
  // `workers`, compared as this says.
  SourceCheck source_check = SourceCheck::kIpv4;
  TransportOptions transport;
  std::string description;  // "worker 3 (10.1.1.2) of job 1, dpdk memif client /tmp/tb/w3.sock"
};

// BuildEndpoint: checks the flags (InvalidArgumentError whose message starts
// with the offending flag: "--memif_socket: required with --dpdk_port=memif")
// and derives the endpoint's options.
absl::StatusOr<EndpointSpec> BuildEndpoint(const EndpointFlags& flags, const EndpointPlace& place);

// WorkerAddress / PsAddress / GroupAddress: the testbed's addresses.
transport::DeviceAddress WorkerAddress(uint8_t job, int rack, int index);
transport::DeviceAddress PsAddress(uint8_t job);
transport::DeviceAddress GroupAddress(uint8_t job);

// StopSignals: SIGINT and SIGTERM (and SIGUSR1, reported separately) taken
// synchronously: the constructor blocks them in the calling thread, so it
// must run before any other thread starts (threads inherit the mask, and the
// signals stay pending until Wait takes them).
class StopSignals {
 public:
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  enum class Event : uint8_t { kNone, kStop, kUser1 };
  // Wait: takes one pending signal, waiting up to `timeout` for one.
  Event Wait(absl::Duration timeout);
  // stopped: a SIGINT or SIGTERM has been taken (by Wait or Poll).
  bool stopped() const { return stop_signal_ != 0; }
  int stop_signal() const { return stop_signal_; }
  // Poll: takes pending signals without waiting; true once stopped.
  bool Poll();

 private:
  sigset_t set_;
  int stop_signal_ = 0;
};

// OpenEndpointDevice: opens spec.transport. A memif client whose server's
// socket is not there yet tries again every 200 ms; a DPDK port's link is
// then awaited (a memif client reconnecting every 200 ms). Either wait ends
// when the link is up, when `deadline` passes (DeadlineExceededError saying
// which port, and what to check) or when a stop signal arrives
// (CancelledError).
// `on_waiting` is called once per `report_every` while waiting (progress).
absl::StatusOr<std::unique_ptr<transport::Device>> OpenEndpointDevice(
    const EndpointSpec& spec, absl::Time deadline, StopSignals& stop,
    absl::Duration report_every = absl::Seconds(10));

// QueueCounters: whether DeviceStatsJson reads the queues' counters, which
// is allowed only once no thread uses the queues (the Worker or
// ParameterServer is gone).
enum class QueueCounters : uint8_t { kRead, kSkip };

// DeviceStatsJson: the device's counters: the sum of its queues' QueueStats
// (kRead) and, for DPDK, the port's counters and link state.
nlohmann::json DeviceStatsJson(transport::Device& device, QueueCounters queues);

// WriteFileAtomically: writes `text` to path.tmp, then renames it to `path`.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_ENDPOINT_H_
