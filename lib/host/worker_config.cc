#include "lib/host/worker_config.h"

#include "lib/host/clock.h"

namespace atp::host {

protocol::JobShape ToJobShape(uint8_t job_id, const RackLayout& layout) {
  protocol::JobShape shape;
  shape.job = job_id;
  shape.workers_per_rack = layout.workers_per_rack;
  return shape;
}

worker::WorkerQueueConfig ToWorkerQueueConfig(const WorkerOptions& options, uint32_t queue) {
  const JobOptions& job = options.job;
  worker::WorkerQueueConfig config;
  config.shape = ToJobShape(job.job_id, job.layout);
  config.rack = options.rack;
  config.worker_in_rack = options.worker_in_rack;
  config.queue = queue;
  config.slots = job.slots;
  config.scale = job.scale;
  config.index_policy = protocol::IndexPolicy::kHashed;
  config.initial_window = job.initial_window;
  config.congestion_control = job.congestion_control == CongestionControl::kFixedWindow
                                  ? worker::WorkerQueueConfig::CongestionControl::kFixedWindow
                                  : worker::WorkerQueueConfig::CongestionControl::kAimd;
  config.rto_floor = ToTimeDelta(job.retransmission_floor);
  config.initial_rto = ToTimeDelta(job.initial_retransmission_timeout);
  config.max_rto = ToTimeDelta(job.max_retransmission_timeout);
  return config;
}

ps::PsConfig ToPsConfig(const ParameterServerOptions& options, uint32_t shard) {
  ps::PsConfig config;
  for (const ParameterServerJobOptions& job : options.jobs) {
    config.jobs.push_back(ToJobShape(job.job_id, job.layout));
    if (job.contribution_skipping) config.contribution_skipping_jobs.push_back(job.job_id);
  }
  config.slots = options.slots;
  config.shard_count = options.server_count * options.io_threads;
  config.shard_index = options.server_index + options.server_count * shard;
  config.orphan_timeout = ToTimeDelta(options.orphan_timeout);
  config.waiting_report_interval = ToTimeDelta(options.waiting_report_interval);
  return config;
}

int ShardOfQueue(const ParameterServerOptions& options, uint32_t queue) {
  const uint32_t shards = options.server_count * options.io_threads;
  const uint32_t index = queue % shards;
  if (index % options.server_count != options.server_index) return -1;
  return static_cast<int>(index / options.server_count);
}

}  // namespace atp::host
