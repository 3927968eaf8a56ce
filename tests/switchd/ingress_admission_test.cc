// IngressAdmission alone: which (port, job, kind) it admits, on frames made by
// the wire codec.
#include "switch_emulator/host/ingress_admission.h"

#include <array>
#include <cstdint>

#include "gtest/gtest.h"

namespace atp::switchd {
namespace {

constexpr uint16_t kBase = wire::kDefaultBasePort;
using Bytes = std::array<uint8_t, wire::kFrameBytes>;

Bytes Frame(uint8_t job, bool ack) {
  wire::FrameFields f;
  f.src_ip = *wire::Ipv4Address::Parse("10.1.0.1");
  f.dst_ip = *wire::Ipv4Address::Parse("10.1.200.1");
  f.header.job = job;
  f.header.seq = wire::MakeSeq(3, 1);
  f.header.ack = ack;
  f.header.bitmap0 = ack ? 0 : 1;
  f.header.bitmap1 = ack ? 0 : 1;
  Bytes b{};
  wire::EncodeFrame(f, wire::Payload{}, kBase, b);
  return b;
}

TEST(IngressAdmissionTest, RestrictedJobsOnlyOnTheirPortsByKind) {
  IngressAdmission a;
  EXPECT_FALSE(a.active());
  const uint32_t ps_side[] = {2};
  const uint32_t worker_side[] = {0, 1};
  ASSERT_TRUE(a.Restrict(1, ps_side, worker_side).ok());
  EXPECT_EQ(a.port_limit(), 3u);
  a.AddPorts(4);
  EXPECT_TRUE(a.active());
  const Bytes ack = Frame(1, true), gradient = Frame(1, false);
  EXPECT_EQ(a.Check(2, ack, kBase), IngressRefusal::kAdmitted);
  EXPECT_EQ(a.Check(0, ack, kBase), IngressRefusal::kParameterPort);
  EXPECT_EQ(a.Check(3, ack, kBase), IngressRefusal::kParameterPort);
  EXPECT_EQ(a.Check(0, gradient, kBase), IngressRefusal::kAdmitted);
  EXPECT_EQ(a.Check(1, gradient, kBase), IngressRefusal::kAdmitted);
  EXPECT_EQ(a.Check(2, gradient, kBase), IngressRefusal::kGradientPort);
  EXPECT_EQ(a.Check(3, gradient, kBase), IngressRefusal::kGradientPort);
  EXPECT_EQ(a.Check(9, gradient, kBase), IngressRefusal::kGradientPort) << "a port never added";
  // Job 2 was never restricted: any port, either kind.
  EXPECT_EQ(a.Check(3, Frame(2, true), kBase), IngressRefusal::kAdmitted);
  EXPECT_EQ(a.Check(9, Frame(2, false), kBase), IngressRefusal::kAdmitted);
}

TEST(IngressAdmissionTest, PortsAddedLaterGetTheirListedBits) {
  IngressAdmission a;
  const uint32_t ps_side[] = {5};
  ASSERT_TRUE(a.Restrict(7, ps_side, {}).ok());
  a.AddPorts(2);
  EXPECT_EQ(a.Check(5, Frame(7, true), kBase), IngressRefusal::kParameterPort) << "not there yet";
  a.AddPorts(6);
  EXPECT_EQ(a.Check(5, Frame(7, true), kBase), IngressRefusal::kAdmitted);
  EXPECT_EQ(a.Check(5, Frame(7, false), kBase), IngressRefusal::kGradientPort)
      << "an empty list admits that kind nowhere";
}

TEST(IngressAdmissionTest, FramesThatAreNotAtpAreNotJudged) {
  IngressAdmission a;
  ASSERT_TRUE(a.Restrict(1, {}, {}).ok());
  a.AddPorts(1);
  Bytes other_port = Frame(1, true);
  other_port[wire::kUdpOffset + 3] ^= 0x40;  // destination port base + 64: not ATP's
  EXPECT_EQ(a.Check(0, other_port, kBase), IngressRefusal::kAdmitted);
  Bytes not_udp = Frame(1, true);
  not_udp[wire::kIpv4Offset + 9] = 6;
  EXPECT_EQ(a.Check(0, not_udp, kBase), IngressRefusal::kAdmitted);
  const Bytes ack = Frame(1, true);
  EXPECT_EQ(a.Check(0, std::span<const uint8_t>(ack).first(100), kBase), IngressRefusal::kAdmitted)
      << "short: the pipeline refuses it as malformed";
  EXPECT_EQ(a.Check(0, ack, kBase), IngressRefusal::kParameterPort);
}

// A forwarding-only switch (no job of its own): its ports restricted by kind
// for every job, known or not; a job's own restriction never reopens them.
TEST(IngressAdmissionTest, PortsRestrictedByKindForEveryJob) {
  IngressAdmission a;
  a.RestrictPort(0, /*parameters=*/false, /*gradients=*/true);   // toward a rack
  a.RestrictPort(2, /*parameters=*/true, /*gradients=*/false);   // toward the PSs
  EXPECT_TRUE(a.active());
  EXPECT_EQ(a.port_limit(), 3u);
  a.AddPorts(4);
  for (uint8_t job : {uint8_t{1}, uint8_t{200}}) {
    EXPECT_EQ(a.Check(0, Frame(job, true), kBase), IngressRefusal::kParameterPort) << int{job};
    EXPECT_EQ(a.Check(0, Frame(job, false), kBase), IngressRefusal::kAdmitted) << int{job};
    EXPECT_EQ(a.Check(2, Frame(job, true), kBase), IngressRefusal::kAdmitted) << int{job};
    EXPECT_EQ(a.Check(2, Frame(job, false), kBase), IngressRefusal::kGradientPort) << int{job};
    EXPECT_EQ(a.Check(3, Frame(job, true), kBase), IngressRefusal::kAdmitted) << "unrestricted";
    EXPECT_EQ(a.Check(3, Frame(job, false), kBase), IngressRefusal::kAdmitted) << "unrestricted";
  }
  const uint32_t everywhere[] = {0, 1, 2, 3};
  ASSERT_TRUE(a.Restrict(5, everywhere, everywhere).ok());
  EXPECT_EQ(a.Check(0, Frame(5, true), kBase), IngressRefusal::kParameterPort);
  EXPECT_EQ(a.Check(2, Frame(5, false), kBase), IngressRefusal::kGradientPort);
  EXPECT_EQ(a.Check(1, Frame(5, true), kBase), IngressRefusal::kAdmitted);
}

TEST(IngressAdmissionTest, APortRestrictedBeforeItIsAddedGetsItsBits) {
  IngressAdmission a;
  a.RestrictPort(5, /*parameters=*/false, /*gradients=*/false);
  a.AddPorts(2);
  a.AddPorts(6);
  EXPECT_EQ(a.Check(5, Frame(1, true), kBase), IngressRefusal::kParameterPort);
  EXPECT_EQ(a.Check(5, Frame(1, false), kBase), IngressRefusal::kGradientPort);
  EXPECT_EQ(a.Check(4, Frame(1, false), kBase), IngressRefusal::kAdmitted);
}

TEST(IngressAdmissionTest, RefusesJobZeroAndARestrictionTwice) {
  IngressAdmission a;
  EXPECT_FALSE(a.Restrict(0, {}, {}).ok());
  ASSERT_TRUE(a.Restrict(4, {}, {}).ok());
  EXPECT_FALSE(a.Restrict(4, {}, {}).ok());
  EXPECT_STREQ(IngressRefusalName(IngressRefusal::kParameterPort), "parameter_port");
  EXPECT_STREQ(IngressRefusalName(IngressRefusal::kGradientPort), "gradient_port");
}

}  // namespace
}  // namespace atp::switchd
