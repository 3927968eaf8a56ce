// tests/transport/loopback_test_util.h: what the loopback wire's tests share:
// node addresses, adding an endpoint, test frames between nodes, writing
// them into a queue's transmit pool, and whether a wait fd is readable.
#ifndef ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_
#define ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport::testing {

// Node: the address of node `n` (10.0.0.n and its default MAC).
inline DeviceAddress Node(uint32_t n) {
  const wire::Ipv4Address ip{0x0A000000u + n};
  return {ip, DefaultMacFor(ip)};
}

// Add: node `n` as an endpoint of `wire`; null (and a test failure) if refused.
inline std::unique_ptr<Device> Add(LoopbackWire& wire, uint32_t n, DeviceOptions device = {},
                                   bool zero_copy_rx = false) {
  LoopbackEndpointOptions options;
  options.device = device;
  options.address = Node(n);
  options.zero_copy_rx = zero_copy_rx;
  auto endpoint = wire.AddEndpoint(options);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? *std::move(endpoint) : nullptr;
}

// Frames: `count` frames from node `from` to node `to`, positions first,
// first + 1, ... (payload seed = position).
inline std::vector<FrameBytes> Frames(uint32_t from, uint32_t to, uint32_t count,
                                      uint32_t first = 0) {
  std::vector<FrameBytes> frames;
  for (uint32_t p = first; p < first + count; ++p) {
    frames.push_back(MakeFrame(Node(from), Node(to), FrameSpec{wire::MakeSeq(0, p), p}));
  }
  return frames;
}

// Write: `frames` written into buffers of the queue's tx_pool, in order;
// fewer when the pool runs out.
inline std::vector<FrameRef> Write(Queue& queue, const std::vector<FrameBytes>& frames) {
  std::vector<FrameRef> refs(frames.size());
  refs.resize(queue.tx_pool().AllocBurst(refs));
  for (size_t i = 0; i < refs.size(); ++i) {
    std::memcpy(refs[i].data, frames[i].data(), kFrameBytes);
    refs[i].length = kFrameBytes;
  }
  return refs;
}

// Take: Write, then one TxBurst (what it does not take is released); returns
// how many it took. Unlike SendAll, it neither retries nor flushes.
inline size_t Take(Queue& queue, const std::vector<FrameBytes>& frames) {
  std::vector<FrameRef> refs = Write(queue, frames);
  const size_t taken = queue.TxBurst(refs);
  ReleaseFrames(std::span(refs).subspan(taken));
  return taken;
}

// SteppedWire: a wire whose processor runs only in StepProcessor.
inline std::shared_ptr<LoopbackWire> SteppedWire(FrameProcessor& processor,
                                                 uint32_t ingress_ring_frames = 1024) {
  LoopbackWireOptions options{&processor, {}};
  options.stepped_processor = true;
  options.ingress_ring_frames = ingress_ring_frames;
  return LoopbackWire::Create(options);
}

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_LOOPBACK_TEST_UTIL_H_
