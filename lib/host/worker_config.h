// lib/host/worker_config.h: public options to the engines' configurations.
#ifndef ATP_LIB_HOST_WORKER_CONFIG_H_
#define ATP_LIB_HOST_WORKER_CONFIG_H_

#include <cstdint>

#include "atp/options.h"
#include "lib/protocol/job_shape.h"
#include "lib/ps/ps_config.h"
#include "lib/worker/worker_queue_config.h"

namespace atp::host {

// ToJobShape: the job id and layout as the engines see them.
protocol::JobShape ToJobShape(uint8_t job_id, const RackLayout& layout);

// ToWorkerQueueConfig: the engine of queue `queue` of the worker `options` describes.
worker::WorkerQueueConfig ToWorkerQueueConfig(const WorkerOptions& options, uint32_t queue);

// ToPsConfig: the engine of thread / shard `shard` (0..io_threads-1) of the
// PS `options` describes: it serves queues q with
// q mod (server_count * io_threads) == server_index + server_count * shard.
ps::PsConfig ToPsConfig(const ParameterServerOptions& options, uint32_t shard);

// ShardOfQueue: which thread / shard of that PS serves queue q, or -1 when
// another PS does.
int ShardOfQueue(const ParameterServerOptions& options, uint32_t queue);

}  // namespace atp::host

#endif  // ATP_LIB_HOST_WORKER_CONFIG_H_
