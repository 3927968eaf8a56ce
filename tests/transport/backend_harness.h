// tests/transport/backend_harness.h: how the conformance suite opens each
// backend. One harness per backend; the suite runs every test over every name
// in BackendNames() and skips (with the harness's reason) those that cannot
// open here.
//
// Adding a backend (DPDK ring/memif, mlx5): implement BackendHarness in a new
// file, and list it in backends.cc under its `#if ATP_HAVE_...`.
#ifndef ATP_TESTS_TRANSPORT_BACKEND_HARNESS_H_
#define ATP_TESTS_TRANSPORT_BACKEND_HARNESS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"

namespace atp::transport::testing {

// DevicePair: two devices that reach each other: `a` sends to b.address()
// and the other way round.
struct DevicePair {
  std::shared_ptr<void> keep_alive;  // whatever the devices need to outlive them
  std::unique_ptr<Device> a;
  std::unique_ptr<Device> b;
};

class BackendHarness {
 public:
  virtual ~BackendHarness() = default;

  // Open: a pair with `options` each. An error (no device, no permission)
  // makes the test skip with its message.
  virtual absl::StatusOr<DevicePair> Open(const DeviceOptions& options) = 0;

  // NoBackpressureReason: empty when TxBurst takes fewer frames once a
  // receiver stops draining; otherwise why this backend cannot.
  virtual std::string NoBackpressureReason() const { return ""; }

  // InjectMalformed: makes `count` things that are not whole ATP frames
  // arrive at pair.b's queue `queue`, through the medium. Unimplemented when
  // the medium cannot carry one (the loopback wire takes only whole frames).
  virtual absl::Status InjectMalformed(DevicePair& pair, uint32_t queue, int count) = 0;
};

// BackendNames: every backend compiled in ("loopback", "kernel_udp", ...).
std::vector<std::string> BackendNames();
// MakeHarness: the harness of one of BackendNames().
std::unique_ptr<BackendHarness> MakeHarness(std::string_view name);

// The addresses harnesses give their devices.
DeviceAddress HarnessAddressA();
DeviceAddress HarnessAddressB();

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_BACKEND_HARNESS_H_
