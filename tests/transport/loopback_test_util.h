// tests/transport/loopback_test_util.h: what the loopback wire's tests share:
// node addresses, adding an endpoint, and whether a wait fd is readable.
#ifndef ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_
#define ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_

#include <poll.h>

#include <memory>

#include "atp/transport/loopback.h"
#include "gtest/gtest.h"

namespace atp::transport::testing {

// Node: the address of node `n` (10.0.0.n and its default MAC).
inline DeviceAddress Node(uint32_t n) {
  const wire::Ipv4Address ip{0x0A000000u + n};
  return {ip, DefaultMacFor(ip)};
}

// Add: node `n` as an endpoint of `wire`; null (and a test failure) if refused.
inline std::unique_ptr<Device> Add(LoopbackWire& wire, uint32_t n, DeviceOptions device = {}) {
  LoopbackEndpointOptions options;
  options.device = device;
  options.address = Node(n);
  auto endpoint = wire.AddEndpoint(options);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? *std::move(endpoint) : nullptr;
}

// Readable: whether `fd` polls readable now.
inline bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_
