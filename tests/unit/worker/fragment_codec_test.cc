#include "lib/worker/fragment_codec.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "atp/quantize.h"
#include "gtest/gtest.h"

namespace atp::worker {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(FragmentCodecTest, QuantizesIntoTheIntegerPath) {
  std::vector<float> values = {0.5f, -1.25f, 3.0f};
  wire::Payload payload;
  payload.fill(0xDEADBEEF);
  EXPECT_EQ(EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, payload),
            FragmentEncoding::kInteger);
  EXPECT_EQ(static_cast<int32_t>(payload[0]), 50000000);
  EXPECT_EQ(static_cast<int32_t>(payload[1]), -125000000);
  EXPECT_EQ(static_cast<int32_t>(payload[2]), 300000000);
}

TEST(FragmentCodecTest, Rule_FragmentsZeroPadded) {
  std::vector<float> values(38, 0.75f);
  wire::Payload payload;
  payload.fill(0xDEADBEEF);
  EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, payload);
  for (size_t i = 0; i < 38; ++i) EXPECT_EQ(static_cast<int32_t>(payload[i]), 75000000) << i;
  for (size_t i = 38; i < wire::kValuesPerFragment; ++i) EXPECT_EQ(payload[i], 0u) << i;
  // The float path pads with +0.0f too.
  payload.fill(0xDEADBEEF);
  EncodeFragment(values, kDefaultScale, FragmentEncoding::kFloat, payload);
  for (size_t i = 38; i < wire::kValuesPerFragment; ++i) EXPECT_EQ(payload[i], 0u) << i;
}

TEST(FragmentCodecTest, Rule_NanSentAsFp) {
  std::vector<float> values = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  wire::Payload payload;
  EXPECT_EQ(EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, payload),
            FragmentEncoding::kFloat);
  EXPECT_EQ(payload[0], Bits(1.0f));
  EXPECT_EQ(payload[1], Bits(values[1]));
  EXPECT_EQ(payload[2], Bits(2.0f));
  EXPECT_EQ(payload[3], 0u);
}

TEST(FragmentCodecTest, Rule_InfinitySentAsFp) {
  std::vector<float> values = {-std::numeric_limits<float>::infinity()};
  wire::Payload payload;
  EXPECT_EQ(EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, payload),
            FragmentEncoding::kFloat);
  EXPECT_EQ(payload[0], Bits(values[0]));
}

TEST(FragmentCodecTest, Rule_SaturatedSentAsFp) {
  // 30 * 1e8 = 3e9 is beyond int32.
  std::vector<float> values = {0.5f, 30.0f};
  wire::Payload payload;
  EXPECT_EQ(EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, payload),
            FragmentEncoding::kFloat);
  EXPECT_EQ(payload[0], Bits(0.5f));
  EXPECT_EQ(payload[1], Bits(30.0f));
}

TEST(FragmentCodecTest, ForcedFloatWritesFloatBits) {
  std::vector<float> values = {0.5f, -0.25f};
  wire::Payload payload;
  EXPECT_EQ(EncodeFragment(values, kDefaultScale, FragmentEncoding::kFloat, payload),
            FragmentEncoding::kFloat);
  EXPECT_EQ(payload[0], Bits(0.5f));
  EXPECT_EQ(payload[1], Bits(-0.25f));
}

TEST(FragmentCodecTest, EncodingIsDeterministic) {
  std::vector<float> values(62);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i) - 0.03f;
  wire::Payload a;
  wire::Payload b;
  EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, a);
  EncodeFragment(values, kDefaultScale, FragmentEncoding::kInteger, b);
  EXPECT_EQ(a, b);
}

TEST(FragmentCodecTest, DecodeResultDequantizesOnlyTheRequestedValues) {
  wire::AtpMessage m;
  m.header.ack = true;
  m.payload[0] = static_cast<uint32_t>(150000000);
  m.payload[1] = static_cast<uint32_t>(-25000000);
  m.payload[2] = 77;
  std::vector<float> out(3, -9.0f);
  DecodeResult(m, kDefaultScale, std::span<float>(out).first(2));
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.25f);
  EXPECT_EQ(out[2], -9.0f);
}

TEST(FragmentCodecTest, DecodeResultTakesFloatBitsWhenFp) {
  wire::AtpMessage m;
  m.header.ack = true;
  m.header.fp = true;
  m.payload[0] = Bits(3.5f);
  m.payload[1] = Bits(std::numeric_limits<float>::infinity());
  std::vector<float> out(2);
  DecodeResult(m, kDefaultScale, out);
  EXPECT_EQ(out[0], 3.5f);
  EXPECT_TRUE(std::isinf(out[1]));
}

// The wire forms write and read exactly the bytes wire::EncodePayload makes
// of the host-order forms, on both paths (integer and float32).
TEST(FragmentCodecTest, WireEncodingIsTheHostEncodingInNetworkOrder) {
  const FragmentQuantizer quantizer(kDefaultScale);
  // Products up to 4e7 (the AVX-512 kernel's general path) and up to 4e5
  // (its single-precision path).
  for (float step : {0.013f, 0.00013f}) {
    std::vector<float> values(62);
    for (size_t i = 0; i < values.size(); ++i) values[i] = step * (static_cast<float>(i) - 31.0f);
    for (size_t n : {size_t{0}, size_t{5}, size_t{62}}) {
      for (bool poison : {false, true}) {
        std::vector<float> v(values.begin(), values.begin() + static_cast<ptrdiff_t>(n));
        if (poison && n > 0) v[n / 2] = std::numeric_limits<float>::quiet_NaN();
        for (FragmentEncoding wanted : {FragmentEncoding::kInteger, FragmentEncoding::kFloat}) {
          wire::Payload host;
          const FragmentEncoding host_used = EncodeFragment(v, kDefaultScale, wanted, host);
          std::array<uint8_t, wire::kPayloadBytes> expected;
          wire::EncodePayload(host, expected);
          std::array<uint8_t, wire::kPayloadBytes> got;
          got.fill(0xEE);
          EXPECT_EQ(EncodeFragmentToWire(v, quantizer, wanted, got), host_used);
          EXPECT_EQ(got, expected) << "n=" << n << " poison=" << poison << " step=" << step;
        }
      }
    }
  }
}

TEST(FragmentCodecTest, DecodeResultFromWireEqualsDecodeResult) {
  for (bool fp : {false, true}) {
    wire::AtpMessage m;
    m.header.ack = true;
    m.header.fp = fp;
    for (size_t i = 0; i < m.payload.size(); ++i) {
      m.payload[i] = fp ? Bits(0.25f * static_cast<float>(i) - 3.0f)
                        : static_cast<uint32_t>(static_cast<int32_t>(i * 12345679) - 400000000);
    }
    std::array<uint8_t, wire::kPayloadBytes> bytes;
    wire::EncodePayload(m.payload, bytes);
    std::vector<float> want(61, -9.0f);
    std::vector<float> got(61, -9.0f);
    DecodeResult(m, kDefaultScale, want);
    DecodeResultFromWire(fp, bytes, kDefaultScale, got);
    EXPECT_EQ(got, want) << "fp=" << fp;
  }
}

}  // namespace
}  // namespace atp::worker
