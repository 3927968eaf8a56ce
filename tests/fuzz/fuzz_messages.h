// tests/fuzz/fuzz_messages.h: ATP messages drawn from fuzzer input for the
// engine targets (ps_engine_fuzzer, worker_engine_fuzzer). Most are
// plausible for the job's shape (right fan-ins, a rack's workers in bitmap0,
// positions near the ones in use), so that the fuzzer spends its time in the
// engines' state machines rather than in their first header check; some are
// arbitrary, so that those checks are exercised too.
#ifndef ATP_TESTS_FUZZ_FUZZ_MESSAGES_H_
#define ATP_TESTS_FUZZ_FUZZ_MESSAGES_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "atp/wire.h"
#include "lib/protocol/job_shape.h"

namespace atp::fuzz {

// FuzzShape: a job of 1..3 racks of 1..3 workers (uneven racks too).
inline protocol::JobShape FuzzShape(FuzzedDataProvider& in, uint8_t job) {
  protocol::JobShape shape;
  shape.job = job;
  const int racks = in.ConsumeIntegralInRange<int>(1, 3);
  for (int r = 0; r < racks; ++r) {
    shape.workers_per_rack.push_back(in.ConsumeIntegralInRange<uint8_t>(1, 3));
  }
  return shape;
}

// FillPayload: 62 values of one kind drawn from one byte: zeros, small
// integers, the int32 extremes (a switch's saturation), arbitrary bits, or
// floats (fp rows: normal, NaN, infinities).
inline void FillPayload(FuzzedDataProvider& in, bool fp, wire::Payload& out) {
  const uint8_t kind = in.ConsumeIntegral<uint8_t>();
  uint32_t state = in.ConsumeIntegral<uint32_t>() | 1;
  for (uint32_t& v : out) {
    state ^= state << 13;  // xorshift32: many values from a few input bytes
    state ^= state >> 17;
    state ^= state << 5;
    if (fp) {
      float f = static_cast<float>(static_cast<int32_t>(state % 2001) - 1000) / 8.0f;
      if (kind % 16 == 0) f = std::numeric_limits<float>::quiet_NaN();
      if (kind % 16 == 1) f = (state & 1) ? std::numeric_limits<float>::infinity() : -3e38f;
      v = std::bit_cast<uint32_t>(f);
      continue;
    }
    switch (kind % 4) {
      case 0: v = 0; break;
      case 1: v = static_cast<uint32_t>(static_cast<int32_t>(state % 2001) - 1000); break;
      case 2: v = (state & 1) ? 0x7FFFFFFFu : 0x80000000u; break;
      default: v = state; break;
    }
  }
}

// GradientHeader: a gradient (or, rarely, anything) of `shape` at queue
// 0..queues-1 and position 0..positions-1.
inline wire::AtpHeader FuzzGradientHeader(FuzzedDataProvider& in, const protocol::JobShape& shape,
                                          uint32_t queues, uint32_t positions) {
  wire::AtpHeader h;
  const uint8_t flags = in.ConsumeIntegral<uint8_t>();
  const uint8_t mode = in.ConsumeIntegral<uint8_t>();
  h.job = mode % 16 == 0 ? in.ConsumeIntegral<uint8_t>() : shape.job;
  h.seq = wire::MakeSeq(in.ConsumeIntegralInRange<uint32_t>(0, queues - 1),
                        in.ConsumeIntegralInRange<uint32_t>(0, positions - 1));
  h.edge = (flags & 0x01) != 0;
  h.resend = (flags & 0x02) != 0;
  h.collision = (flags & 0x04) != 0;
  h.ecn = (flags & 0x08) != 0;
  h.fp = (flags & 0x10) != 0;
  h.ack = (flags & 0xE0) == 0xE0;  // 1 in 8: a parameter packet where a gradient belongs
  h.aggregator = in.ConsumeIntegral<uint16_t>();
  const int racks = shape.racks();
  int widest = 1;
  for (int r = 0; r < racks; ++r) widest = std::max(widest, shape.workers_in_rack(r));
  const uint32_t pick = in.ConsumeIntegral<uint32_t>();
  if (mode % 16 == 1) {  // arbitrary fan-ins and bitmaps
    h.fan_in0 = static_cast<uint8_t>(1 + pick % 32);
    h.fan_in1 = static_cast<uint8_t>(1 + (pick >> 5) % 32);
    h.bitmap0 = in.ConsumeIntegral<uint32_t>();
    h.bitmap1 = in.ConsumeIntegral<uint32_t>();
  } else if (!h.edge) {  // level 1: one rack's workers
    const int rack = static_cast<int>(pick % static_cast<uint32_t>(racks));
    h.fan_in0 = static_cast<uint8_t>(shape.workers_in_rack(rack));
    h.fan_in1 = static_cast<uint8_t>(racks);
    h.bitmap0 = (pick >> 8) & shape.RackBitmap(rack);
    if (h.bitmap0 == 0) h.bitmap0 = 1;
    h.bitmap1 = 1u << rack;
  } else {  // level 2: whole racks
    h.fan_in0 = static_cast<uint8_t>(widest);
    h.fan_in1 = static_cast<uint8_t>(racks);
    h.bitmap0 = protocol::JobShape::LowBits(widest);
    h.bitmap1 = (pick >> 8) & shape.AllRacksBitmap();
    if (h.bitmap1 == 0) h.bitmap1 = 1;
  }
  return h;
}

}  // namespace atp::fuzz

#endif  // ATP_TESTS_FUZZ_FUZZ_MESSAGES_H_
