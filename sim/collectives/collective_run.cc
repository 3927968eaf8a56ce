// sim/collectives/collective_run.cc: see collective_run.h.
#include "sim/collectives/collective_run.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/packet.h"
#include "sim/simulator.h"

namespace atp::sim {
namespace {

// A frame's header here: destination host and step, at the frame's start
// (nothing on these links parses ATP).
struct FrameHeader {
  uint32_t destination;
  uint32_t step;
};

FrameHeader ReadHeader(const Packet& packet) {
  FrameHeader header;
  std::memcpy(&header, packet.bytes.data(), sizeof(header));
  return header;
}

uint64_t FramesOf(uint64_t bytes) {
  return (bytes + kCollectiveFrameBytes - 1) / kCollectiveFrameBytes;
}

// Crossbar: the switch: forwards each frame to its destination's downlink.
class Crossbar : public PacketReceiver {
 public:
  explicit Crossbar(std::vector<Link*> downlinks) : downlinks_(std::move(downlinks)) {}
  void Receive(PacketPtr packet, int /*port*/, TimePoint /*now*/) override {
    const FrameHeader header = ReadHeader(*packet);
    downlinks_[header.destination]->Send(std::move(packet));
  }

 private:
  std::vector<Link*> downlinks_;
};

// Host: runs its part of the schedule, paced by its uplink's queue.
class Host : public Actor, public PacketReceiver {
 public:
  Host(Simulator* sim, PacketPool* pool, const CollectiveSchedule* schedule, int id, Link* uplink)
      : sim_(sim), pool_(pool), schedule_(schedule), id_(id), uplink_(uplink) {
    const size_t steps = schedule->steps.size();
    expected_.assign(steps, 0);
    received_.assign(steps, 0);
    for (size_t s = 0; s < steps; ++s) {
      for (const Transfer& t : schedule->steps[s].transfers) {
        if (t.destination == id_) expected_[s] += FramesOf(t.bytes);
      }
    }
  }

  void Start(TimePoint now) {
    LoadSends();
    Advance(now);
  }

  void Receive(PacketPtr packet, int /*port*/, TimePoint now) override {
    ++received_[ReadHeader(*packet).step];
    Advance(now);
  }

  void Act(TimePoint now) override {
    SendWhatFits();
    Advance(now);
  }

  bool done() const { return step_ == schedule_->steps.size(); }
  TimePoint finish_time() const { return finish_; }
  uint64_t frames_sent() const { return frames_sent_; }

 private:
  struct PendingSend {
    uint32_t destination;
    uint64_t frames;
  };

  void LoadSends() {
    sends_.clear();
    if (done()) return;
    for (const Transfer& t : schedule_->steps[step_].transfers) {
      if (t.source == id_) sends_.push_back({static_cast<uint32_t>(t.destination), FramesOf(t.bytes)});
    }
    SendWhatFits();
  }

  void SendWhatFits() {
    while (!sends_.empty() && uplink_->FreeSlots() > 0) {
      PendingSend& send = sends_.front();
      PacketPtr packet = pool_->Allocate();
      const FrameHeader header{send.destination, static_cast<uint32_t>(step_)};
      std::memcpy(packet->bytes.data(), &header, sizeof(header));
      uplink_->Send(std::move(packet));
      ++frames_sent_;
      if (--send.frames == 0) sends_.erase(sends_.begin());
    }
    if (!sends_.empty()) {
      sim_->Schedule(this, uplink_->TimeWhenDepthAtMost(uplink_->config().queue_capacity_packets - 1));
    }
  }

  // Advance: moves on while the current step's sends are queued and its
  // frames have all arrived.
  void Advance(TimePoint now) {
    while (!done() && sends_.empty() && received_[step_] >= expected_[step_]) {
      ++step_;
      if (done()) {
        finish_ = now;
        return;
      }
      LoadSends();
    }
  }

  Simulator* sim_;
  PacketPool* pool_;
  const CollectiveSchedule* schedule_;
  const int id_;
  Link* uplink_;
  std::vector<uint64_t> expected_;  // frames each step brings this host
  std::vector<uint64_t> received_;  // frames arrived, by step
  std::vector<PendingSend> sends_;  // the current step's frames not yet queued
  size_t step_ = 0;
  TimePoint finish_ = TimePoint::Zero();
  uint64_t frames_sent_ = 0;
};

}  // namespace

absl::StatusOr<CollectiveRunResult> RunCollective(const CollectiveSchedule& schedule,
                                                  const LinkConfig& host_link) {
  if (host_link.queue_capacity_packets < 1 || !(host_link.bandwidth_bps > 0)) {
    return absl::InvalidArgumentError("RunCollective: the host link needs a queue and bandwidth");
  }
  Simulator sim;
  PacketPool pool;
  const int n = schedule.nodes;
  std::vector<std::unique_ptr<Link>> uplinks, downlinks;
  std::vector<Link*> down;
  for (int h = 0; h < n; ++h) {
    uplinks.push_back(std::make_unique<Link>(&sim, &pool, host_link, absl::StrCat("up", h)));
    downlinks.push_back(std::make_unique<Link>(&sim, &pool, host_link, absl::StrCat("down", h)));
    down.push_back(downlinks.back().get());
  }
  Crossbar crossbar(down);
  std::vector<std::unique_ptr<Host>> hosts;
  for (int h = 0; h < n; ++h) {
    hosts.push_back(std::make_unique<Host>(&sim, &pool, &schedule, h, uplinks[h].get()));
    uplinks[h]->Connect(&crossbar, h);
    downlinks[h]->Connect(hosts.back().get(), 0);
  }
  for (auto& host : hosts) host->Start(sim.Now());
  sim.RunUntilIdle();

  CollectiveRunResult result;
  result.completed = true;
  TimePoint last = TimePoint::Zero();
  for (const auto& host : hosts) {
    result.completed = result.completed && host->done();
    last = std::max(last, host->finish_time());
    result.frames_sent += host->frames_sent();
  }
  result.completion_time = last - TimePoint::Zero();
  for (const auto* links : {&uplinks, &downlinks}) {
    for (const auto& link : *links) {
      result.frame_deliveries += link->counters().delivered;
      result.tail_drops += link->counters().tail_drops;
    }
  }
  sim.Clear();
  return result;
}

}  // namespace atp::sim
