#include "switch_emulator/host/routing.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace atp::switchd {
namespace {

constexpr uint32_t MaskOf(uint32_t length) {
  return length == 0 ? 0 : ~uint32_t{0} << (32 - length);
}

}  // namespace

absl::Status RouteTable::Add(wire::Ipv4Address prefix, uint32_t length, uint32_t port) {
  if (length > 32) {
    return absl::InvalidArgumentError(absl::StrCat("route length ", length, " is over 32"));
  }
  if ((prefix.value & ~MaskOf(length)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("route ", prefix.ToString(), "/", length, " has bits beyond its length"));
  }
  if (port == kNoPort) {
    return absl::InvalidArgumentError(absl::StrCat("route ", prefix.ToString(), "/", length,
                                                   ": port ", port, " is not a port index"));
  }
  auto [it, inserted] = by_length_[length].emplace(prefix.value, port);
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("route ", prefix.ToString(), "/", length, " is already in the table"));
  }
  if (std::find(lengths_.begin(), lengths_.end(), length) == lengths_.end()) {
    lengths_.push_back(length);
    std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  }
  ++size_;
  ++version_;
  port_limit_ = std::max(port_limit_, port + 1);
  return absl::OkStatus();
}

absl::Status RouteTable::Set(wire::Ipv4Address prefix, uint32_t length, uint32_t port) {
  if (length <= 32 && port != kNoPort) {
    if (auto it = by_length_[length].find(prefix.value); it != by_length_[length].end()) {
      it->second = port;
      ++version_;
      port_limit_ = std::max(port_limit_, port + 1);
      return absl::OkStatus();
    }
  }
  return Add(prefix, length, port);
}

uint32_t RouteTable::LookupPort(uint32_t ipv4) const {
  for (uint32_t length : lengths_) {
    const absl::flat_hash_map<uint32_t, uint32_t>& table = by_length_[length];
    if (auto it = table.find(ipv4 & MaskOf(length)); it != table.end()) return it->second;
  }
  return kNoPort;
}

absl::Status MulticastTable::Add(wire::Ipv4Address group, std::vector<uint32_t> ports) {
  if (!IsMulticastAddress(group.value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(group.ToString(), " is not a multicast address (224.0.0.0/4)"));
  }
  if (ports.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", group.ToString(), " has no ports"));
  }
  const uint32_t limit = *std::max_element(ports.begin(), ports.end()) + 1;
  if (!groups_.emplace(group.value, std::move(ports)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("group ", group.ToString(), " is already in the table"));
  }
  port_limit_ = std::max(port_limit_, limit);
  return absl::OkStatus();
}

absl::Status MulticastTable::AddMember(wire::Ipv4Address group, uint32_t port) {
  if (!IsMulticastAddress(group.value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(group.ToString(), " is not a multicast address (224.0.0.0/4)"));
  }
  std::vector<uint32_t>& ports = groups_[group.value];
  if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  port_limit_ = std::max(port_limit_, port + 1);
  return absl::OkStatus();
}

}  // namespace atp::switchd
