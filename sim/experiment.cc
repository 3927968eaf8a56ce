#include "sim/experiment.h"

#include <utility>

#include "atp/status_macros.h"
#include "sim/mangling_filters.h"
#include "sim/random.h"

namespace atp::sim {
namespace {

// Streams of Random::DeriveSeed: one per (link, filter kind).
enum FilterStream : uint64_t {
  kLossStream = 1,
  kBurstStream,
  kReorderStream,
  kDuplicateStream,
  kCorruptStream,
  kStreamsPerLink = 8,
};

// The stream of the workers' timer jitter (WorkerQueueConfig::timer_seed),
// beyond every link's.
constexpr uint64_t kTimerStream = ~uint64_t{0};

}  // namespace

absl::StatusOr<std::unique_ptr<Experiment>> Experiment::Create(const ExperimentConfig& config) {
  if (config.workload.iterations < 0) {
    return absl::InvalidArgumentError("ExperimentConfig.workload.iterations: must be >= 0");
  }
  std::unique_ptr<Experiment> experiment(new Experiment(config));
  // The run's seed also seeds the workers' timer jitter (same seed, same run).
  experiment->config_.topology.worker.timer_seed = Random::DeriveSeed(config.seed, kTimerStream);
  ATP_ASSIGN_OR_RETURN(experiment->network_, BuildNetwork(experiment->config_.topology));
  experiment->AttachImpairments();
  Network& net = *experiment->network_;
  experiment->tasks_ = std::make_unique<TaskThread>(config.input_thread);
  for (size_t j = 0; j < net.job_count(); ++j) {
    Experiment* self = experiment.get();
    experiment->drivers_.push_back(
        std::make_unique<JobDriver>(experiment->tasks_.get(), net.job(j), config.workload,
                                    net.partitions() > 1, [self] { self->OnJobDone(); }));
  }
  // The first inputs are part of setting the run up, made on both cores; the
  // later ones are made on the helper while the run goes on.
  if (config.input_thread) {
    for (auto& driver : experiment->drivers_) driver->AwaitFirstInputs();
  }
  experiment->job_has_dead_worker_.assign(net.job_count(), false);
  return experiment;
}

Experiment::Experiment(const ExperimentConfig& config) : config_(config) {}

Experiment::~Experiment() {
  // Alarms unschedule themselves; clear first so that costs nothing.
  if (network_) {
    for (int p = 0; p < network_->partitions(); ++p) network_->sim(p).Clear();
  }
  sampler_.reset();
  drivers_.clear();
  tasks_.reset();
  network_.reset();
}

void Experiment::AttachImpairments() {
  const Impairments& imp = config_.impairments;
  const auto& links = network_->links();
  for (size_t i = 0; i < links.size(); ++i) {
    Link* link = links[i].get();
    if (!imp.kinds.empty()) {
      bool selected = false;
      for (LinkKind kind : imp.kinds) {
        for (Link* l : network_->LinksOfKind(kind)) selected = selected || l == link;
      }
      if (!selected) continue;
    }
    auto seed = [&](uint64_t stream) {
      return Random::DeriveSeed(config_.seed, i * kStreamsPerLink + stream);
    };
    if (imp.loss > 0) {
      link->AddFilter(std::make_unique<RandomLossFilter>(imp.loss, seed(kLossStream), imp.loss_class));
    }
    if (imp.burst_loss) {
      link->AddFilter(std::make_unique<GilbertElliottLossFilter>(*imp.burst_loss,
                                                                 seed(kBurstStream), imp.loss_class));
    }
    if (imp.corrupt > 0) {
      link->AddFilter(std::make_unique<CorruptFilter>(imp.corrupt, seed(kCorruptStream)));
    }
    if (imp.duplicate > 0) {
      link->AddFilter(std::make_unique<DuplicateFilter>(imp.duplicate, seed(kDuplicateStream)));
    }
    if (imp.reorder > 0) {
      link->AddFilter(std::make_unique<ReorderFilter>(imp.reorder, imp.reorder_delay,
                                                      seed(kReorderStream)));
    }
  }
}

void Experiment::At(TimePoint time, std::function<void()> action) {
  network_->At(time, std::move(action));
}

void Experiment::KillWorker(size_t job, size_t worker, TimePoint time) {
  At(time, [this, job, worker] {
    network_->job(job).workers[worker]->Kill();
    job_has_dead_worker_[job] = true;
    if (AllLiveJobsDone()) network_->RequestStop();
  });
}

bool Experiment::AllLiveJobsDone() const {
  for (size_t j = 0; j < drivers_.size(); ++j) {
    if (!drivers_[j]->done() && !job_has_dead_worker_[j]) return false;
  }
  return true;
}

void Experiment::OnJobDone() {
  if (AllLiveJobsDone()) network_->RequestStop();
}

void Experiment::Sample(TimePoint now) {
  for (size_t j = 0; j < network_->job_count(); ++j) {
    const uint64_t fragments = network_->job(j).workers.front()->Stats().parameter_packets;
    const double bits = static_cast<double>(fragments - last_sample_fragments_[j]) *
                        static_cast<double>(wire::kPayloadBytes) * 8.0;
    samples_[j].push_back(bits / config_.sample_interval.ToSeconds() / 1e9);
    last_sample_fragments_[j] = fragments;
  }
  if (!AllLiveJobsDone()) ScheduleSample(now + config_.sample_interval);
}

void Experiment::ScheduleSample(TimePoint time) {
  if (network_->partitions() == 1) {
    sampler_->Set(time);
    return;
  }
  // Between windows: it reads workers of both partitions.
  network_->At(time, [this, time] {
    if (sampling_) Sample(time);
  });
}

ExperimentResult Experiment::Run() {
  for (size_t j = 0; j < drivers_.size(); ++j) {
    JobDriver* driver = drivers_[j].get();
    if (network_->partitions() > 1) {
      // Each worker starts on its own partition's clock.
      driver->StartAt(network_->job(j).start_time);
    } else {
      At(network_->job(j).start_time, [driver] { driver->Start(); });
    }
  }
  if (config_.sample_interval > TimeDelta::Zero()) {
    last_sample_fragments_.assign(network_->job_count(), 0);
    samples_.assign(network_->job_count(), {});
    if (network_->partitions() == 1) {
      sampler_ = std::make_unique<Alarm>(&network_->sim(), [this](TimePoint now) { Sample(now); });
    }
    sampling_ = true;
    ScheduleSample(TimePoint::Zero() + config_.sample_interval);
  }
  const TimePoint limit = TimePoint::Zero() + config_.time_limit;
  network_->RunUntil(limit);
  const TimePoint finished = network_->Now();
  if (sampler_) sampler_->Cancel();
  sampling_ = false;
  // Settle: nothing new starts; in-flight frames drain and idle switches
  // release orphans. Workers of unfinished jobs keep retrying, so settle for
  // a bounded time only.
  network_->RunUntil(finished + config_.settle_time);

  ExperimentResult result;
  result.completed = true;
  result.exact = true;
  for (size_t j = 0; j < network_->job_count(); ++j) {
    const JobNodes& job = network_->job(j);
    const JobDriver& driver = *drivers_[j];
    JobResult r;
    r.job = job.shape.job;
    r.workers = job.shape.total_workers();
    r.racks = job.shape.racks();
    // A job that finished only while settling (after the limit) did not
    // finish within the limit.
    r.completed = driver.done() && driver.finish_time() <= limit;
    if (r.completed) {
      r.completion_time = driver.finish_time() - driver.start_time();
      const double seconds = r.completion_time.ToSeconds();
      if (seconds > 0) {
        r.goodput_gbps = static_cast<double>(config_.workload.values) * 4.0 * 8.0 *
                         config_.workload.iterations / seconds / 1e9;
      }
    }
    r.frames_into_ps = job.ps->statistics().gradients;
    r.ps_param_sent = job.ps->engine().counters().param_sent;
    r.collisions = job.ps->engine().counters().collisions_rehashed;
    r.overflows = job.ps->engine().counters().overflows;
    for (const WorkerNode* w : job.workers) {
      const worker::WorkerQueueStats s = w->Stats();
      r.retransmissions += s.resends_loss + s.resends_timeout + s.resends_overflow;
      r.timeouts += s.timeouts;
    }
    r.ecn_marks = job.workers.front()->Stats().ecn_marks;
    for (int p = 0; p < network_->rack_count(); ++p) {
      r.aggregators_in_use_at_end += network_->tor(p)->AggregatorsOwnedBy(r.job);
    }
    r.results_checked = driver.results_checked();
    r.exact = driver.exact() && r.completed;
    r.first_error = driver.first_error();
    if (!samples_.empty()) r.goodput_series_gbps = samples_[j];
    result.completed = result.completed && r.completed;
    result.exact = result.exact && r.exact;
    result.jobs.push_back(std::move(r));
  }
  result.simulated_time = finished - TimePoint::Zero();
  result.events = network_->events_processed();
  result.frame_deliveries = network_->FrameDeliveries();
  for (const auto& link : network_->links()) {
    result.tail_drops += link->counters().tail_drops;
    result.filter_drops += link->counters().filter_drops;
    for (const auto& filter : link->filters()) result.filter_actions += filter->affected();
  }
  for (const auto& w : network_->mutable_workers()) {
    result.endpoint_decode_errors += w->decode_errors();
  }
  for (const auto& ps : network_->mutable_ps()) {
    result.endpoint_decode_errors += ps->statistics().decode_errors;
  }
  for (int p = 0; p < network_->rack_count(); ++p) {
    result.switch_malformed += network_->tor(p)->pipeline().counters().malformed;
    result.aggregators_in_use_at_end += network_->tor(p)->pipeline().aggregators_in_use();
  }
  // Frames the worker hosts keep for their next sends are not in flight.
  uint64_t kept_by_hosts = 0;
  for (size_t j = 0; j < network_->job_count(); ++j) {
    for (const WorkerNode* w : network_->job(j).workers) kept_by_hosts += w->spare_tx_frames();
  }
  result.packets_outstanding_at_end = network_->packets_outstanding() - kept_by_hosts;
  return result;
}

}  // namespace atp::sim
