// tests/transport/dpdk/conformance_backend.cc: the one backend of a DPDK
// conformance binary, "dpdk" over the medium named at compile time
// (ATP_DPDK_MEDIUM: ring, memif, af_packet, af_xdp, tap). Takes the place of
// tests/transport/backends.cc, which lists the in-process backends.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/transport/backend_harness.h"
#include "tests/transport/dpdk/dpdk_harness.h"

#ifndef ATP_DPDK_MEDIUM
#error "ATP_DPDK_MEDIUM must name the medium (kRing, kMemif, kAfPacket, kAfXdp, kTap)"
#endif

namespace atp::transport::testing {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

}  // namespace

DeviceAddress HarnessAddressA() { return DeviceAddress{Ip("10.0.0.1"), DefaultMacFor(Ip("10.0.0.1"))}; }
DeviceAddress HarnessAddressB() { return DeviceAddress{Ip("10.0.0.2"), DefaultMacFor(Ip("10.0.0.2"))}; }

std::vector<std::string> BackendNames() { return {"dpdk"}; }

std::unique_ptr<BackendHarness> MakeHarness(std::string_view name) {
  if (name != "dpdk") return nullptr;
  return MakeDpdkHarness(DpdkMedium::ATP_DPDK_MEDIUM);
}

}  // namespace atp::transport::testing
