#include "sim/network.h"

namespace atp::sim {

Network::~Network() {
  // Nodes and links unschedule themselves as they go; with the queue empty
  // that costs nothing.
  sim_.Clear();
  workers_.clear();
  ps_nodes_.clear();
  tors_.clear();
  core_.reset();
  links_.clear();
}

int Network::JobIndex(uint8_t job) const {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].shape.job == job) return static_cast<int>(i);
  }
  return -1;
}

std::vector<Link*> Network::LinksOfKind(LinkKind kind) const {
  std::vector<Link*> out;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (link_kinds_[i] == kind) out.push_back(links_[i].get());
  }
  return out;
}

uint64_t Network::FrameDeliveries() const {
  uint64_t total = 0;
  for (const auto& link : links_) total += link->counters().delivered;
  return total;
}

std::pair<int, int> Network::Connect(Node* a, Node* b, const LinkConfig& a_to_b,
                                     LinkKind kind_a_to_b, const LinkConfig& b_to_a,
                                     LinkKind kind_b_to_a) {
  auto ab = std::make_unique<Link>(&sim_, &pool_, a_to_b, a->name() + "->" + b->name());
  auto ba = std::make_unique<Link>(&sim_, &pool_, b_to_a, b->name() + "->" + a->name());
  const int port_a = a->AddPort(ab.get());
  const int port_b = b->AddPort(ba.get());
  ab->Connect(b, port_b);
  ba->Connect(a, port_a);
  links_.push_back(std::move(ab));
  link_kinds_.push_back(kind_a_to_b);
  links_.push_back(std::move(ba));
  link_kinds_.push_back(kind_b_to_a);
  return {port_a, port_b};
}

}  // namespace atp::sim
