#include "sim/topology.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/ps/ps_config.h"
#include "sim/addressing.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::sim {
namespace {

using switch_emulator::JobConfig;
using switch_emulator::JobLevels;
using switch_emulator::PartitionMode;
using switch_emulator::PipelineConfig;
using switch_emulator::PipelineMode;
using switch_emulator::SwitchPipeline;

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("TopologyConfig.", field, ": ", message));
}

absl::Status Validate(const TopologyConfig& config) {
  if (config.worker_racks < 1 || config.worker_racks > wire::kMaxFanIn) {
    return Invalid("worker_racks", absl::StrCat(config.worker_racks, " is not in 1..32"));
  }
  if (config.jobs.empty()) return Invalid("jobs", "at least one job is needed");
  if (config.partitions != 1 && config.partitions != 2) {
    return Invalid("partitions", absl::StrCat(config.partitions, " is neither 1 nor 2"));
  }
  if (config.partitions == 2 && config.fabric_link.propagation_delay <= TimeDelta::Zero()) {
    return Invalid("partitions", "2 need fabric links with a propagation delay (the window)");
  }
  if (config.queues < 1 || config.queues > static_cast<uint32_t>(wire::kMaxQueues)) {
    return Invalid("queues", absl::StrCat(config.queues, " is not in 1..16"));
  }
  if (config.switches.aggregators < 1) return Invalid("switches.aggregators", "must be >= 1");
  // 1 Mb/s to 1 Pb/s, as every link (picosecond serialization times stay exact).
  if (!(config.ps_model.link_bps == 0 ||
        (config.ps_model.link_bps >= 1e6 && config.ps_model.link_bps <= 1e15))) {
    return Invalid("ps_model.link_bps",
                   absl::StrCat(config.ps_model.link_bps, " is neither 0 nor in [1e6, 1e15]"));
  }
  if (config.ps_model.packet_service < TimeDelta::Zero() ||
      config.ps_model.packet_service > TimeDelta::FromSeconds(1)) {
    return Invalid("ps_model.packet_service", "must be in [0, 1 s]");
  }
  std::set<int> ids;
  for (size_t j = 0; j < config.jobs.size(); ++j) {
    const JobPlacement& job = config.jobs[j];
    const std::string field = absl::StrCat("jobs[", j, "]");
    if (job.job < 1 || !ids.insert(job.job).second) {
      return Invalid(field, absl::StrCat("job id ", job.job, " is 0 or repeated"));
    }
    if (static_cast<int>(job.workers_per_rack.size()) != config.worker_racks) {
      return Invalid(field, absl::StrCat("workers_per_rack has ", job.workers_per_rack.size(),
                                         " entries for ", config.worker_racks, " racks"));
    }
    int total = 0;
    for (int w : job.workers_per_rack) {
      if (w < 0 || w > wire::kMaxFanIn) {
        return Invalid(field, absl::StrCat(w, " workers in a rack is not in 0..32"));
      }
      total += w;
    }
    if (total == 0) return Invalid(field, "has no workers");
  }
  return absl::OkStatus();
}

// Plan: what BuildNetwork decides before it creates anything.
struct Plan {
  int racks = 0;     // physical racks, PS rack included
  int ps_rack = 0;
  std::vector<protocol::JobShape> shapes;
  std::vector<std::vector<int>> shape_racks;  // per job: shape rack -> physical rack
  std::vector<std::vector<JobConfig>> tor_jobs;  // per physical rack
};

Plan MakePlan(const TopologyConfig& config) {
  Plan plan;
  const bool own_rack = config.ps_placement == PsPlacement::kOwnRack ||
                        (config.ps_placement == PsPlacement::kAuto && config.worker_racks > 1);
  plan.racks = config.worker_racks + (own_rack ? 1 : 0);
  plan.ps_rack = own_rack ? config.worker_racks : 0;
  plan.tor_jobs.resize(static_cast<size_t>(plan.racks));
  for (const JobPlacement& job : config.jobs) {
    protocol::JobShape shape;
    shape.job = job.job;
    std::vector<int> racks;
    for (int p = 0; p < config.worker_racks; ++p) {
      const int w = job.workers_per_rack[static_cast<size_t>(p)];
      if (w == 0) continue;
      shape.workers_per_rack.push_back(static_cast<uint8_t>(w));
      racks.push_back(p);
    }
    const bool multi_rack = shape.racks() > 1;
    const bool level2 = multi_rack && config.aggregation == AggregationMode::kTwoLevel;
    bool ps_tor_listed = false;
    for (int p : racks) {
      JobLevels levels = JobLevels::kLevel1;
      if (p == plan.ps_rack && level2) {
        levels = JobLevels::kBoth;
        ps_tor_listed = true;
      }
      plan.tor_jobs[static_cast<size_t>(p)].push_back(
          JobConfig{.job = job.job, .levels = levels, .multicast_group = GroupIp(job.job)});
    }
    if (level2 && !ps_tor_listed) {
      plan.tor_jobs[static_cast<size_t>(plan.ps_rack)].push_back(
          JobConfig{.job = job.job, .levels = JobLevels::kLevel2, .multicast_group = GroupIp(job.job)});
    }
    plan.shapes.push_back(std::move(shape));
    plan.shape_racks.push_back(std::move(racks));
  }
  return plan;
}

absl::StatusOr<SwitchPipeline> MakePipeline(const TopologyConfig& config,
                                            std::vector<JobConfig> jobs, int rack) {
  PipelineConfig pc;
  pc.aggregator_count = config.switches.aggregators;
  pc.orphan_timeout = config.switches.orphan_timeout;
  pc.ecn_threshold = config.switches.ecn_threshold;
  pc.base_port = config.base_port;
  pc.partition = config.switches.partition;
  pc.orphan_scan_per_packet = config.switches.orphan_scan_per_packet;
  if (pc.partition == PartitionMode::kStatic && !jobs.empty()) {
    const uint32_t share = static_cast<uint32_t>(pc.aggregator_count / jobs.size());
    if (share == 0) {
      return Invalid("switches.aggregators",
                     absl::StrCat(pc.aggregator_count, " cannot be split over ", jobs.size(),
                                  " jobs in rack ", rack));
    }
    for (size_t k = 0; k < jobs.size(); ++k) {
      jobs[k].slice = {.first = static_cast<uint32_t>(k) * share, .count = share};
    }
  }
  pc.jobs = std::move(jobs);
  ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline, SwitchPipeline::Create(pc));
  if (config.aggregation == AggregationMode::kNone) pipeline.SetMode(PipelineMode::kForwardOnly);
  return pipeline;
}

}  // namespace

std::vector<int> SpreadEvenly(int workers, int racks) {
  std::vector<int> out(static_cast<size_t>(racks), workers / racks);
  for (int r = 0; r < workers % racks; ++r) ++out[static_cast<size_t>(r)];
  return out;
}

absl::StatusOr<std::unique_ptr<Network>> BuildNetwork(const TopologyConfig& config) {
  ATP_RETURN_IF_ERROR(Validate(config));
  const Plan plan = MakePlan(config);
  if (config.partitions == 2 && plan.racks < 2) {
    return Invalid("partitions", "2 need two or more racks (a core between them)");
  }
  auto net = std::make_unique<Network>();
  net->SetPartitions(config.partitions);
  net->set_ps_rack(plan.ps_rack);
  // partition_of: rack -> partition (see TopologyConfig::partitions).
  const int first_half = (config.worker_racks + 1) / 2;
  auto partition_of = [&](int rack) {
    return config.partitions == 2 && rack >= first_half ? 1 : 0;
  };
  const TimeDelta scan_period = config.switches.orphan_timeout / 4;

  for (int p = 0; p < plan.racks; ++p) {
    ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline,
                         MakePipeline(config, plan.tor_jobs[static_cast<size_t>(p)], p));
    const int part = partition_of(p);
    net->mutable_tors().push_back(std::make_unique<AtpSwitchNode>(
        absl::StrCat("tor", p), &net->sim(part), &net->pool(part), std::move(pipeline), scan_period,
        config.switches.ecn_threshold, config.base_port));
    net->mutable_tors().back()->set_partition(part);
  }
  if (plan.racks > 1) {
    // The core aggregates no job: the switch host with an empty job table,
    // as atp-switchd runs a core (it forwards, and marks CE past the threshold).
    PipelineConfig core_config;
    core_config.aggregator_count = 1;
    core_config.ecn_threshold = config.switches.ecn_threshold;
    core_config.base_port = config.base_port;
    ATP_ASSIGN_OR_RETURN(SwitchPipeline core_pipeline, SwitchPipeline::Create(core_config));
    net->mutable_core() = std::make_unique<AtpSwitchNode>(
        "core", &net->sim(), &net->pool(), std::move(core_pipeline), scan_period,
        config.switches.ecn_threshold, config.base_port);
  }

  // Hosts, and the ToR side of their tables.
  std::vector<int> hosts_in_rack(static_cast<size_t>(plan.racks), 0);
  std::vector<std::vector<uint32_t>> rack_ips(static_cast<size_t>(plan.racks));
  for (size_t j = 0; j < config.jobs.size(); ++j) {
    const protocol::JobShape& shape = plan.shapes[j];
    JobNodes nodes;
    nodes.shape = shape;
    nodes.racks = plan.shape_racks[j];
    nodes.start_time = config.jobs[j].start_time;

    const int ps_part = partition_of(plan.ps_rack);
    const int ps_host = hosts_in_rack[static_cast<size_t>(plan.ps_rack)]++;
    const uint32_t ps_ip = HostIp(plan.ps_rack, ps_host);
    ps::PsConfig ps_config;
    ps_config.jobs.push_back(shape);
    ps_config.slots = config.worker.slots;
    ps_config.orphan_timeout = config.ps_orphan_timeout > TimeDelta::Zero()
                                   ? config.ps_orphan_timeout
                                   : config.worker.max_rto.IsInfinite()
                                         ? TimeDelta::Infinite()
                                         : config.worker.max_rto * 2;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<PsNode> ps,
                         PsNode::Create(absl::StrCat("ps", +shape.job), &net->sim(ps_part),
                                        &net->pool(ps_part), std::move(ps_config), ps_ip,
                                        config.base_port, config.ps_model.packet_service));
    ps->set_partition(ps_part);
    AtpSwitchNode* ps_tor = net->tor(plan.ps_rack);
    LinkConfig ps_link = config.host_link;
    if (config.ps_model.link_bps > 0) ps_link.bandwidth_bps = config.ps_model.link_bps;
    const int ps_port =
        net->Connect(ps.get(), ps_tor, ps_link, LinkKind::kPsToTor, ps_link, LinkKind::kTorToPs)
            .second;
    ps_tor->table().AddRoute(ps_ip, ps_port);
    rack_ips[static_cast<size_t>(plan.ps_rack)].push_back(ps_ip);
    nodes.ps = ps.get();
    net->mutable_ps().push_back(std::move(ps));

    for (int r = 0; r < shape.racks(); ++r) {
      const int p = nodes.racks[static_cast<size_t>(r)];
      AtpSwitchNode* tor = net->tor(p);
      for (int w = 0; w < shape.workers_in_rack(r); ++w) {
        const uint32_t ip = HostIp(p, hosts_in_rack[static_cast<size_t>(p)]++);
        WorkerNodeConfig wc;
        wc.engine = config.worker;
        wc.engine.shape = shape;
        wc.engine.rack = r;
        wc.engine.worker_in_rack = w;
        wc.queues = config.queues;
        wc.ip = ip;
        wc.ps_ip = ps_ip;
        wc.base_port = config.base_port;
        ATP_ASSIGN_OR_RETURN(
            std::unique_ptr<WorkerNode> worker,
            WorkerNode::Create(absl::StrCat("w", +shape.job, ".", r, ".", w),
                               &net->sim(partition_of(p)), &net->pool(partition_of(p)), wc));
        worker->set_partition(partition_of(p));
        const int tor_port = net->Connect(worker.get(), tor, config.host_link,
                                          LinkKind::kWorkerToTor, config.host_link,
                                          LinkKind::kTorToWorker)
                                 .second;
        tor->table().AddRoute(ip, tor_port);
        tor->table().AddGroupMember(shape.job, tor_port);
        rack_ips[static_cast<size_t>(p)].push_back(ip);
        nodes.workers.push_back(worker.get());
        net->mutable_workers().push_back(std::move(worker));
      }
    }
    net->mutable_jobs().push_back(std::move(nodes));
  }

  // The fabric: every ToR to the core.
  if (AtpSwitchNode* core = net->core()) {
    for (int p = 0; p < plan.racks; ++p) {
      AtpSwitchNode* tor = net->tor(p);
      const auto [tor_port, core_port] =
          net->Connect(tor, core, config.fabric_link, LinkKind::kTorToCore, config.fabric_link,
                       LinkKind::kCoreToTor);
      tor->table().SetDefaultPort(tor_port);
      for (uint32_t ip : rack_ips[static_cast<size_t>(p)]) core->table().AddRoute(ip, core_port);
      for (size_t j = 0; j < net->job_count(); ++j) {
        const JobNodes& job = net->job(j);
        bool has_workers_here = false;
        bool has_workers_elsewhere = false;
        for (int r : job.racks) (r == p ? has_workers_here : has_workers_elsewhere) = true;
        // Parameter packets: the core sends them to every rack with workers;
        // the PS's ToR sends them up when workers are elsewhere.
        if (has_workers_here) core->table().AddGroupMember(job.shape.job, core_port);
        if (p == plan.ps_rack && has_workers_elsewhere) {
          tor->table().AddGroupMember(job.shape.job, tor_port);
        }
      }
    }
  }
  return net;
}

}  // namespace atp::sim
