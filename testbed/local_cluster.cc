#include "testbed/local_cluster.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "atp/transport/kernel_udp.h"
#include "lib/runtime/loop_threads.h"

namespace atp::testbed {
namespace {

constexpr uint8_t kPsRack = 200;
// Frames the fabric thread processes per step (a few ports' bursts).
constexpr size_t kFabricBudget = 256;

wire::Ipv4Address Ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return wire::Ipv4Address{(uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d};
}

}  // namespace

wire::Ipv4Address LocalCluster::WorkerIp(uint8_t job, int rack, int index) {
  return Ip(10, job, static_cast<uint8_t>(rack), static_cast<uint8_t>(index + 1));
}

wire::Ipv4Address LocalCluster::PsIp(uint8_t job, uint32_t index) {
  return Ip(10, job, kPsRack, static_cast<uint8_t>(index + 1));
}

transport::DeviceAddress LocalCluster::GroupAddress(uint8_t job) {
  transport::DeviceAddress group;
  group.ipv4 = Ip(239, 1, 0, job);
  group.mac.bytes = {0x01, 0x00, 0x5e, 0x01, 0x00, job};
  return group;
}

absl::StatusOr<std::unique_ptr<transport::Device>> LocalCluster::OpenDevice(
    const LocalClusterOptions& options, wire::Ipv4Address ip, uint32_t queues,
    uint16_t base_port) {
  TransportOptions t;
  t.kind = options.transport;
  const transport::DeviceAddress address{ip, transport::DefaultMacFor(ip)};
  if (options.transport == TransportKind::kLoopback) {
    t.loopback_wire = wire_;
    t.loopback.address = address;
    t.loopback.device.num_queues = queues;
    t.loopback.device.base_port = base_port;
    t.loopback.device.rx_ring_frames = options.ring_frames;
    // The worker and PS loops release each burst as a whole, in order, right
    // after handling it: they read their frames in the receive ring itself.
    t.loopback.zero_copy_rx = true;
  } else {
    t.kernel_udp.address = address;
    t.kernel_udp.bind = {*wire::Ipv4Address::Parse("127.0.0.1"), 0};
    t.kernel_udp.device.num_queues = queues;
    t.kernel_udp.device.base_port = base_port;
  }
  return OpenTransport(t);
}

namespace {

// ThreadPolling: LocalClusterOptions::polling for the fabric's thread and
// for the I/O loops' threads: polling.cpus split as the header says.
struct ThreadPolling {
  PollingOptions fabric;
  PollingOptions io;
  // Own: the polling of an endpoint with `threads` threads of its own:
  // io.cpus turned on by the threads placed before it (*placed, which it
  // advances), so that the endpoints' threads take the CPUs in turn
  // instead of each starting at the first.
  PollingOptions Own(uint32_t threads, size_t* placed) const {
    PollingOptions own = io;
    if (!own.cpus.empty()) {
      const size_t offset = *placed % own.cpus.size();
      std::rotate(own.cpus.begin(), own.cpus.begin() + static_cast<std::ptrdiff_t>(offset),
                  own.cpus.end());
    }
    *placed += threads;
    return own;
  }
};
ThreadPolling SplitCpus(const LocalClusterOptions& options) {
  ThreadPolling p{options.polling, options.polling};
  const std::vector<int>& cpus = options.polling.cpus;
  if (options.fabric_thread && !cpus.empty()) {
    p.fabric.cpus = {cpus.front()};
    if (cpus.size() > 1) p.io.cpus.assign(cpus.begin() + 1, cpus.end());
  }
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Create(
    const LocalClusterOptions& options) {
  if (options.jobs.empty()) {
    return absl::InvalidArgumentError("LocalClusterOptions.jobs: needs at least one job");
  }
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  const bool loopback = options.transport == TransportKind::kLoopback;
  const ThreadPolling polling = SplitCpus(options);
  for (size_t j = 0; j < options.jobs.size(); ++j) {
    ATP_RETURN_IF_ERROR(
        options.jobs[j].job.Validate(absl::StrCat("LocalClusterOptions.jobs[", j, "].job")));
  }
  if (options.ps_on_fabric_thread && !(loopback && options.fabric_thread)) {
    return absl::InvalidArgumentError(
        "LocalClusterOptions.ps_on_fabric_thread: needs fabric_thread (and the loopback wire)");
  }
  if (options.shared_threads > 0) {
    absl::StatusOr<std::shared_ptr<SharedIoThreads>> threads =
        SharedIoThreads::Create(options.shared_threads, polling.io, "atp-cluster");
    if (!threads.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("LocalClusterOptions.shared_threads: ", threads.status().message()));
    }
    cluster->shared_threads_ = *std::move(threads);
  }
  if (loopback) {
    SwitchFabricOptions fabric;
    fabric.aggregation = options.aggregation;
    fabric.aggregator_count = options.aggregator_count;
    fabric.ecn_threshold = options.ecn_threshold;
    fabric.orphan_timeout = options.orphan_timeout;
    fabric.loss_rate = options.loss_rate;
    fabric.seed = options.seed;
    fabric.wipe_every_frames = options.wipe_every_frames;
    fabric.base_port = options.jobs[0].job.base_port;
    for (const LocalJob& job : options.jobs) {
      FabricJob f;
      f.job_id = job.job.job_id;
      f.group = GroupAddress(job.job.job_id).ipv4;
      for (int r = 0; r < job.job.layout.racks(); ++r) {
        f.racks.emplace_back();
        for (int i = 0; i < job.job.layout.workers_in_rack(r); ++i) {
          f.racks.back().push_back(WorkerIp(job.job.job_id, r, i));
        }
      }
      fabric.jobs.push_back(std::move(f));
    }
    ATP_ASSIGN_OR_RETURN(cluster->fabric_, SwitchFabric::Create(fabric));
    transport::LoopbackWireOptions wire_options;
    wire_options.processor = cluster->fabric_.get();
    wire_options.stepped_processor = options.fabric_thread;
    cluster->wire_ = transport::LoopbackWire::Create(std::move(wire_options));
    if (options.fabric_thread) {
      transport::LoopbackWire* wire = cluster->wire_.get();
      host::PollingThread::StepFunction step = [wire](TimePoint) {
        return host::StepResult{wire->StepProcessor(kFabricBudget) > 0, TimePoint::Infinite()};
      };
      ATP_ASSIGN_OR_RETURN(cluster->fabric_thread_,
                           SharedIoThreads::Create(1, polling.fabric, "atp-fabric"));
      cluster->fabric_step_ = cluster->fabric_thread_->threads().all[0]->Add(
          {wire->processor_wait_fd()}, std::move(step));
    }
  }

  // Devices first: kernel UDP peers must all be known before any queue runs.
  cluster->jobs_.resize(options.jobs.size());
  for (size_t j = 0; j < options.jobs.size(); ++j) {
    const JobOptions& job = options.jobs[j].job;
    Job& out = cluster->jobs_[j];
    for (uint32_t k = 0; k < options.jobs[j].parameter_servers; ++k) {
      ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::Device> device,
                           cluster->OpenDevice(options, PsIp(job.job_id, k), job.io_threads,
                                               job.base_port));
      out.ps_devices.push_back(std::move(device));
    }
    for (int r = 0; r < job.layout.racks(); ++r) {
      for (int i = 0; i < job.layout.workers_in_rack(r); ++i) {
        ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::Device> device,
                             cluster->OpenDevice(options, WorkerIp(job.job_id, r, i),
                                                 job.io_threads, job.base_port));
        out.worker_devices.push_back(std::move(device));
      }
    }
    if (!loopback) {
      // Every worker knows every PS, and every PS every worker.
      for (auto& ps : out.ps_devices) {
        auto& ps_udp = static_cast<transport::KernelUdpDevice&>(*ps);
        for (auto& w : out.worker_devices) {
          auto& w_udp = static_cast<transport::KernelUdpDevice&>(*w);
          ATP_RETURN_IF_ERROR(ps_udp.AddPeer(w_udp.self()));
          ATP_RETURN_IF_ERROR(w_udp.AddPeer(ps_udp.self()));
        }
      }
    }
  }

  size_t own_threads_placed = 0;  // endpoints' own threads so far (ThreadPolling::Own)
  for (size_t j = 0; j < options.jobs.size(); ++j) {
    const LocalJob& spec = options.jobs[j];
    const JobOptions& job = spec.job;
    Job& out = cluster->jobs_[j];
    std::vector<transport::DeviceAddress> ps_addresses;
    for (auto& device : out.ps_devices) ps_addresses.push_back(device->address());
    std::vector<transport::DeviceAddress> worker_addresses;
    for (auto& device : out.worker_devices) worker_addresses.push_back(device->address());

    for (uint32_t k = 0; k < spec.parameter_servers && spec.start_parameter_servers; ++k) {
      ParameterServerOptions ps;
      ParameterServerJobOptions served;
      served.job_id = job.job_id;
      served.layout = job.layout;
      served.contribution_skipping = spec.contribution_skipping;
      if (loopback) {
        served.delivery = ParameterDelivery::kMulticast;
        served.multicast_group = GroupAddress(job.job_id);
      } else {
        served.delivery = ParameterDelivery::kUnicast;
        served.workers = worker_addresses;
      }
      ps.jobs.push_back(std::move(served));
      ps.slots = job.slots;
      ps.server_index = k;
      ps.server_count = spec.parameter_servers;
      ps.io_threads = spec.ps_threads;
      ps.base_port = job.base_port;
      ps.polling = options.ps_on_fabric_thread ? polling.fabric
                   : options.shared_threads > 0 ? polling.io
                                                : polling.Own(ps.io_threads, &own_threads_placed);
      ps.shared_io_threads =
          options.ps_on_fabric_thread ? cluster->fabric_thread_ : cluster->shared_threads_;
      ps.orphan_timeout = spec.ps_orphan_timeout;
      if (job.stall_timeout != absl::InfiniteDuration()) {
        ps.waiting_report_interval = std::min(absl::Seconds(1), job.stall_timeout / 4);
      }
      if (spec.ps_waiting_report_interval.has_value()) {
        ps.waiting_report_interval = *spec.ps_waiting_report_interval;
      }
      out.server_options.push_back(ps);
      ATP_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServer> server,
                           ParameterServer::Start(std::move(ps), *out.ps_devices[k]));
      out.servers.push_back(std::move(server));
    }
    size_t rank = 0;
    for (int r = 0; r < job.layout.racks(); ++r) {
      for (int i = 0; i < job.layout.workers_in_rack(r); ++i, ++rank) {
        WorkerOptions w;
        w.job = job;
        w.rack = r;
        w.worker_in_rack = i;
        w.parameter_servers = ps_addresses;
        w.polling = options.shared_threads > 0 ? polling.io
                                               : polling.Own(job.io_threads, &own_threads_placed);
        w.shared_io_threads = cluster->shared_threads_;
        if (spec.adjust_worker) spec.adjust_worker(rank, w);
        out.worker_options.push_back(w);
        ATP_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker,
                             Worker::Create(std::move(w), *out.worker_devices[rank]));
        out.workers.push_back(std::move(worker));
      }
    }
  }
  return cluster;
}

LocalCluster::~LocalCluster() {
  for (Job& job : jobs_) job.workers.clear();
  for (Job& job : jobs_) job.servers.clear();
  // The thread may outlive this (the servers' saved options hold it with the
  // PS on it): only the fabric's step must stop before the wire and the
  // fabric go.
  if (fabric_thread_ != nullptr) fabric_thread_->threads().all[0]->Remove(fabric_step_);
  for (Job& job : jobs_) {
    job.worker_devices.clear();
    job.ps_devices.clear();
  }
}

absl::Status LocalCluster::RestartParameterServer(size_t job, size_t index,
                                                  const std::function<void()>& while_stopped) {
  Job& j = jobs_[job];
  j.servers[index].reset();
  if (while_stopped) while_stopped();
  ATP_ASSIGN_OR_RETURN(j.servers[index],
                       ParameterServer::Start(j.server_options[index], *j.ps_devices[index]));
  return absl::OkStatus();
}

absl::Status LocalCluster::RecreateWorkers(
    size_t job, const std::function<void(size_t rank, WorkerOptions& options)>& adjust) {
  Job& j = jobs_[job];
  for (std::unique_ptr<Worker>& worker : j.workers) worker.reset();
  for (size_t rank = 0; rank < j.workers.size(); ++rank) {
    if (adjust) adjust(rank, j.worker_options[rank]);
    ATP_ASSIGN_OR_RETURN(j.workers[rank],
                         Worker::Create(j.worker_options[rank], *j.worker_devices[rank]));
  }
  return absl::OkStatus();
}

}  // namespace atp::testbed
