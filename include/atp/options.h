// atp/options.h: what a job, a worker and a parameter server are made of.
//
// Options are plain structs: fill them in, then Worker::Create or
// ParameterServer::Start calls Validate() and refuses bad options with an
// absl::InvalidArgumentError whose message starts with the offending field's
// path ("WorkerOptions.job.slots: 300 is not a power of two").
//
//   atp::WorkerOptions options;
//   options.job.job_id = 7;
//   options.job.layout = atp::RackLayout::Uniform(/*racks=*/2, /*workers_per_rack=*/2);
//   options.job.io_threads = 2;
//   options.rack = 1;
//   options.worker_in_rack = 0;
//   options.parameter_servers.push_back({ps_ip, ps_mac});
//   ATP_RETURN_IF_ERROR(options.Validate());
//
// JobOptions are job-wide: every worker of a job (and its parameter servers,
// for the fields they share) must use the same values, because they decide
// which queue, position and window slot each fragment travels with
// (ATP-SPEC section 3). The PS checks slots, layout, io_threads and scale from
// the workers' joins, and each operation's size from their kOpBegins: a
// mismatch fails every worker with kMismatch (atp/failure.h). Other fields
// that differ show up as operations that stall and fail after
// JobOptions::stall_timeout.
#ifndef ATP_OPTIONS_H_
#define ATP_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "atp/quantize.h"
#include "atp/transport.h"
#include "atp/wire.h"

namespace atp {

// kDefaultSlots: JobOptions::slots and ParameterServerOptions::slots unless
// set: one value, so that a default Worker and a default PS agree.
inline constexpr uint32_t kDefaultSlots = 1024;

class SharedIoThreads;  // atp/shared_io_threads.h

// RackLayout: how a job's workers sit in racks (the job's "shape", ATP-SPEC
// section 2): one entry per rack, the number of workers in it. A worker is
// named by (rack, worker_in_rack); "rack-major order" lists rack 0's workers,
// then rack 1's, and so on.
struct RackLayout {
  std::vector<uint8_t> workers_per_rack;  // 1..32 racks, each 1..32 workers

  // Uniform: `racks` racks of `workers_per_rack` workers each. Counts
  // outside 0..255 are kept at the nearer bound, never wrapped (258 workers
  // is not 2), so that Validate refuses them.
  static RackLayout Uniform(int racks, int workers_per_rack);

  int racks() const { return static_cast<int>(workers_per_rack.size()); }
  int workers_in_rack(int rack) const { return workers_per_rack[static_cast<size_t>(rack)]; }
  int total_workers() const;
  // RankOf: the rack-major index of (rack, worker_in_rack),
  // 0..total_workers()-1; -1 when the layout has no such worker.
  int RankOf(int rack, int worker_in_rack) const;

  // Validate: 1..32 racks of 1..32 workers. `field` prefixes the message.
  absl::Status Validate(std::string_view field = "RackLayout") const;
};

// CongestionControl: how a worker queue sizes its window (ATP-SPEC section 5).
enum class CongestionControl : uint8_t {
  kAimd,         // ECN- and loss-driven AIMD from initial_window
  kFixedWindow,  // initial_window forever (experiments, tests)
};

// SchedulerOptions: how a worker cuts operations into pieces for its I/O
// threads (lib/scheduler). Job-wide: the mapping of fragments to queues
// depends on these values.
struct SchedulerOptions {
  // An operation of F fragments (62 floats each) is cut into
  // max(ceil(F / max_piece_fragments), min(io_threads, F / min_piece_fragments))
  // pieces of nearly equal size (at least one), each given to the I/O thread
  // with the least work assigned so far.
  uint32_t min_piece_fragments = 64;
  uint32_t max_piece_fragments = 1024;

  absl::Status Validate(std::string_view field = "SchedulerOptions") const;
};

// JobOptions: what every worker of a job shares.
struct JobOptions {
  uint8_t job_id = 0;  // 1..255
  RackLayout layout;
  // io_threads: queues per worker, one I/O thread each, 1..16. Fragments of
  // queue q travel on UDP port base_port + q and go to parameter server
  // q mod (number of parameter servers).
  uint32_t io_threads = 1;
  // scale: quantization factor: a value x travels as round(x * scale).
  double scale = kDefaultScale;
  // slots: window slots per queue, a power of two in [initial_window, 65536];
  // the parameter servers' ParameterServerOptions::slots must be equal. The
  // window never grows past it. The default is atp/window_sizing.h's S for
  // 100 Gb/s and a 10 us round trip (a rack): room for AIMD to grow the
  // window to that path's bandwidth-delay product and beyond, on a host
  // whose scheduling stretches the round trip too (bench/RESULTS.md
  // "Default slots"). A switch needs slots x io_threads aggregators per job.
  uint32_t slots = kDefaultSlots;
  // initial_window: fragments in flight per queue at start, 1..slots; AIMD
  // grows it from there.
  uint32_t initial_window = 200;
  CongestionControl congestion_control = CongestionControl::kAimd;
  // Retransmission timeout: never below retransmission_floor; before the
  // first round-trip sample it is initial_retransmission_timeout; it backs off
  // up to max_retransmission_timeout.
  absl::Duration retransmission_floor = absl::Milliseconds(1);
  absl::Duration initial_retransmission_timeout = absl::Milliseconds(20);
  absl::Duration max_retransmission_timeout = absl::Seconds(1);
  // base_port: ATP's UDP ports are base_port .. base_port + 15; must equal the
  // transport device's base_port.
  uint16_t base_port = wire::kDefaultBasePort;
  SchedulerOptions scheduler;
  // stall_timeout: an operation whose queue completes no fragment for this
  // long while it waits for results fails with a named cause (atp/failure.h:
  // the PS unreachable, the PS waiting for named workers, or a stall) instead
  // of hanging, and the Worker becomes unusable. The clock restarts with
  // every completed fragment and when an idle queue gets work, so it bounds
  // how long a worker waits for its slowest peer to issue the same
  // operation: raise it for jobs whose workers may drift further apart.
  // At least 2 x max_retransmission_timeout (a live PS gets two resends to
  // answer); absl::InfiniteDuration() never fails (the old behaviour).
  absl::Duration stall_timeout = absl::Seconds(10);

  absl::Status Validate(std::string_view field = "JobOptions") const;
};

// PollingOptions: how an idle I/O thread backs off. It spins (checking its
// queues between PAUSE hints) for spin_iterations idle loops, then checks
// them between sched_yield() calls for yield_iterations more, then sleeps:
// first min_sleep, doubling up to max_sleep, woken early by new work, by a
// frame on a queue whose backend has a wait_fd, or by a retransmission
// deadline. Any work resets it.
//
// No spinning by default: a spinning thread keeps its core for its whole
// scheduler slice, so wherever a job's threads outnumber the cores (a worker
// and a PS on one machine, a shared host) the thread that holds the next
// frame waits behind it (atp-ping on 2 cores: 1.0-1.4 ms average run-queue
// delay per wake-up with 512 spins, 0.12-0.24 ms without; bench/RESULTS.md
// "The small-operation latency floor"). A yielding poll is as quick when the
// core is free (sched_yield returns at once) and gives the core away at once
// when it is not. Spin (or BusyPolling) only with a core per I/O thread.
struct PollingOptions {
  uint32_t spin_iterations = 0;
  uint32_t yield_iterations = 64;
  absl::Duration min_sleep = absl::Microseconds(20);
  absl::Duration max_sleep = absl::Milliseconds(1);
  // cpus: where the threads run, one CPU each: the group's thread i (a
  // Worker's queue i, a ParameterServer's I/O thread i, SharedIoThreads'
  // thread i) on cpus[i mod cpus.size()]. Empty (the default): wherever the
  // kernel schedules them. Pinning keeps two busy threads off one core when
  // there are as many cores as busy threads (the in-process cluster on 2
  // cores: median goodput 436 -> 483-489 MB/s, bench/RESULTS.md "Pinned
  // threads"). A thread's CPU must be in the process's cpuset, else the
  // endpoint's Create fails naming it. Ids in 0..1023. Endpoints with
  // threads of their own each count from 0: give each its own list.
  std::vector<int> cpus;

  // BusyPolling: never sleeps nor yields (lowest latency; one core per thread).
  static PollingOptions BusyPolling();

  absl::Status Validate(std::string_view field = "PollingOptions") const;
};

// SourceCheck: what a worker or a parameter server compares the source of a
// received frame with, before its engine sees it (docs/security.md). Frames
// that fail are dropped and counted (`source_refused` in the stats).
enum class SourceCheck : uint8_t {
  kIpv4,        // the IPv4 source must be one the options name (the default)
  kIpv4AndMac,  // and the Ethernet source the MAC given with it: only where
                // nothing rewrites MACs on the way (one L2 segment, ATP
                // switches, the kernel UDP overlay); a router would
  kOff,         // any source (a network that enforces sources itself, or tests)
};

// WorkerOptions: one worker of a job.
struct WorkerOptions {
  JobOptions job;
  // This worker's place in job.layout.
  int rack = 0;
  int worker_in_rack = 0;
  // parameter_servers: the job's PS hosts (IPv4 and MAC put into frames);
  // queue q's fragments go to parameter_servers[q mod size()]. 1..16 entries.
  std::vector<transport::DeviceAddress> parameter_servers;
  // parameter_source_check: a queue accepts parameter packets (and every
  // other frame) only from the PS that serves it, parameter_servers[q mod
  // size()], compared as this says.
  SourceCheck parameter_source_check = SourceCheck::kIpv4;
  PollingOptions polling;
  // shared_io_threads: null (the default): each queue's loop runs on a
  // thread of its own, backing off as `polling` says. Set: the loops run on
  // these threads, shared with the process's other endpoints that name them
  // (atp/shared_io_threads.h), and `polling` is unused.
  std::shared_ptr<SharedIoThreads> shared_io_threads;
  // max_burst: frames per transport burst, 1..256.
  uint32_t max_burst = 32;

  absl::Status Validate(std::string_view field = "WorkerOptions") const;
};

// ParameterDelivery: how a PS sends parameter packets to a job's workers.
enum class ParameterDelivery : uint8_t {
  kMulticast,  // one frame to the job's multicast group; the network replicates it
               // (the ATP switches, or the loopback fabric)
  kUnicast,    // one frame per worker, to each worker's address (no switch on the path)
};

// ParameterServerJobOptions: one job a parameter server serves.
struct ParameterServerJobOptions {
  uint8_t job_id = 0;  // 1..255, distinct among a server's jobs
  RackLayout layout;
  ParameterDelivery delivery = ParameterDelivery::kUnicast;
  // multicast_group: kMulticast only: the group's IPv4 and MAC.
  transport::DeviceAddress multicast_group;
  // workers: kUnicast only: every worker's address, in rack-major order
  // (layout.total_workers() entries).
  std::vector<transport::DeviceAddress> workers;
  // gradient_sources: the only sources the job's frames are accepted from
  // (ParameterServerOptions::gradient_source_check says how they compare):
  // its workers' addresses, since switches forward a worker's frame with its
  // source unchanged. Empty: `workers` if any are named (kUnicast always
  // names them), else no check at all (a kMulticast job: name them here).
  std::vector<transport::DeviceAddress> gradient_sources;
  // contribution_skipping: the job's operations may skip contributions
  // (SkipVariant::kContributions in OpOptions::skip): the PS takes each
  // fragment's contributor set from the packets' declared fan-ins, trusting
  // the workers and switches (docs/skipreduce.md). Off: such packets are
  // dropped as shape mismatches and the operations never complete.
  bool contribution_skipping = false;

  absl::Status Validate(std::string_view field = "ParameterServerJobOptions") const;
};

// ParameterServerOptions: one parameter server (one PS host of its jobs).
struct ParameterServerOptions {
  std::vector<ParameterServerJobOptions> jobs;  // at least one
  // slots: window slots per queue; equal to every served job's JobOptions::slots.
  uint32_t slots = kDefaultSlots;
  // server_index / server_count: this PS among the jobs' PS hosts; it serves
  // queues q with q mod server_count == server_index (ATP-SPEC section 3).
  uint32_t server_index = 0;
  uint32_t server_count = 1;
  // io_threads: threads of a ParameterServer, or lock shards of an
  // EmbeddedParameterServer; server_count * io_threads <= 16. Thread t serves
  // queues q with q mod (server_count * io_threads) ==
  // server_index + server_count * t.
  uint32_t io_threads = 1;
  uint16_t base_port = wire::kDefaultBasePort;
  // gradient_source_check: how a job's gradient_sources are compared with a
  // received frame's source (EmbeddedParameterServer::HandleMessage has no
  // source to compare: its caller's sockets see the sender).
  SourceCheck gradient_source_check = SourceCheck::kIpv4;
  PollingOptions polling;
  // shared_io_threads: null (the default): io_threads threads of its own.
  // Set: its io_threads loops run on these threads instead (as
  // WorkerOptions::shared_io_threads); an EmbeddedParameterServer ignores it.
  std::shared_ptr<SharedIoThreads> shared_io_threads;
  uint32_t max_burst = 32;  // 1..256
  // orphan_timeout: a fragment the PS has partial state for (integer sums, or
  // float32 rows on the overflow path) and that no frame touched for this
  // long is dropped: its workers died or the job was aborted (ATP-SPEC
  // invariant 5). A live worker resends at least every
  // JobOptions::max_retransmission_timeout, which keeps the state, so this
  // must exceed every served job's max_retransmission_timeout plus a round
  // trip; the default is twice that option's default. Dropping state a live
  // worker still needed costs only a re-aggregation from resends, never a
  // wrong result. Positive; absl::InfiniteDuration() keeps state forever.
  absl::Duration orphan_timeout = absl::Seconds(2);
  // waiting_report_interval: a fragment incomplete for this long makes the PS
  // multicast a status control frame naming the workers that have not
  // contributed to it (at most one per job and queue per interval), so that
  // workers that stall fail naming them (atp/failure.h), and asks the job's
  // workers to join that queue again: a result of a restarted PS's
  // predecessor that some workers lack is then replayed (docs/protocol.md
  // "Runs and restarts"). Keep it at most a
  // quarter of the jobs' JobOptions::stall_timeout. Positive;
  // absl::InfiniteDuration() never reports.
  absl::Duration waiting_report_interval = absl::Seconds(1);

  absl::Status Validate(std::string_view field = "ParameterServerOptions") const;
};

}  // namespace atp

#endif  // ATP_OPTIONS_H_
