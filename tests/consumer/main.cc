// Uses only installed public headers: quantizes a fragment, frames it, decodes
// it back, and checks the values survived; validates transport options (kernel
// UDP, and DPDK when libatp was built with it), which links the transport
// libraries without opening a device; when libatp was built with gloo, runs a
// one-rank ring allreduce (atp::collectives) over a loopback gloo context.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "atp/config.h"
#include "atp/quantize.h"
#include "atp/transport/kernel_udp.h"
#include "atp/wire.h"
#if ATP_HAVE_DPDK
#include "atp/transport/dpdk.h"
#endif
#if ATP_HAVE_GLOO
#include <memory>

#include "atp/collectives.h"
#include "gloo/rendezvous/hash_store.h"
#endif

namespace {

bool TransportOptionsWork() {
  atp::transport::KernelUdpOptions kernel;
  const atp::wire::Ipv4Address ip = *atp::wire::Ipv4Address::Parse("127.0.0.1");
  kernel.address = {ip, atp::transport::DefaultMacFor(ip)};
  kernel.bind = {ip, 0};
  kernel.encapsulation = atp::transport::KernelUdpEncapsulation::kWholeFrame;
  kernel.gateway = atp::transport::SocketAddress{ip, 47000};
  if (!kernel.Validate().ok()) return false;
  kernel.encapsulation = atp::transport::KernelUdpEncapsulation::kAtpMessage;
  if (kernel.Validate().ok()) return false;  // a gateway needs kWholeFrame
#if ATP_HAVE_DPDK
  atp::transport::DpdkEalOptions eal;
  if (!eal.Validate().ok()) return false;
  const std::vector<std::string> args = eal.ToArgs();
  if (args.empty()) return false;
#endif
  return true;
}

// CollectivesWork: a ring allreduce on a one-rank gloo context (the average
// over one rank is its own data), which links and runs atp::collectives and
// gloo from the installed package; and the options refuse a bad chunk size.
bool CollectivesWork() {
#if ATP_HAVE_GLOO
  gloo::rendezvous::HashStore store;
  const absl::StatusOr<std::shared_ptr<gloo::Context>> context =
      atp::collectives::Connect(store, {.rank = 0, .ranks = 1});
  if (!context.ok()) return false;
  atp::collectives::RingAllreduceOptions options;
  options.op = atp::collectives::ReduceOp::kAverage;
  std::vector<float> data = {0.5f, -2.0f, 3.0f};
  if (!atp::collectives::RingAllreduce(**context, data, options).ok()) return false;
  if (data != std::vector<float>{0.5f, -2.0f, 3.0f}) return false;
  options.chunk_bytes = 6;  // not a multiple of 4
  if (options.Validate(1).ok()) return false;
#endif
  return true;
}

}  // namespace

int main() {
  std::array<float, atp::wire::kValuesPerFragment> gradient{};
  gradient[0] = 0.5f;
  gradient[61] = -0.25f;
  std::array<int32_t, atp::wire::kValuesPerFragment> quantized{};
  if (atp::Quantize(gradient, atp::kDefaultScale, quantized) != atp::QuantizeOutcome::kExact) {
    return 1;
  }

  atp::wire::FrameFields fields;
  fields.header.job = 1;
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  atp::wire::Payload payload{};
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint32_t>(quantized[i]);
  std::array<uint8_t, atp::wire::kFrameBytes> frame{};
  atp::wire::EncodeFrame(fields, payload, atp::wire::kDefaultBasePort, frame);

  atp::wire::FrameFields decoded;
  atp::wire::Payload decoded_payload{};
  if (atp::wire::DecodeFrame(frame, atp::wire::kDefaultBasePort, &decoded, &decoded_payload) !=
          atp::wire::DecodeError::kOk ||
      decoded_payload != payload) {
    return 1;
  }
  if (!TransportOptionsWork()) return 1;
  if (!CollectivesWork()) return 1;
  std::printf("libatp %d.%d.%d consumer: ok (DPDK %d, mlx5 %d, gloo %d)\n", ATP_VERSION_MAJOR,
              ATP_VERSION_MINOR, ATP_VERSION_PATCH, ATP_HAVE_DPDK, ATP_HAVE_MLX5, ATP_HAVE_GLOO);
  return 0;
}
