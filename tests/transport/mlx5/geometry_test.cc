// tests/transport/mlx5/geometry_test.cc: queue sizes and limits planned from
// options and device capabilities (transport/mlx5/geometry.h), and reading
// those capabilities from verbs (device_caps.h).
#include "transport/mlx5/geometry.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/mlx5_test_util.h"
#include "transport/mlx5/device_caps.h"

namespace atp::transport::mlx5 {
namespace {

using testing::ConnectX5Caps;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// --- Send entries -----------------------------------------------------------

TEST(SendWqeBytes, MatchesTheProviderArithmetic) {
  // 48 bytes of control + Ethernet segment, TSO header room padded to 16,
  // 16 per gather entry; rounded to 64-byte basic blocks.
  EXPECT_EQ(SendWqeBytes({0, 1, 0}), 64u);     // 48 + 16
  EXPECT_EQ(SendWqeBytes({42, 1, 0}), 128u);   // 48 + 48 + 16 = 112
  EXPECT_EQ(SendWqeBytes({64, 1, 0}), 128u);   // 48 + 64 + 16
  EXPECT_EQ(SendWqeBytes({128, 1, 0}), 192u);  // 48 + 128 + 16
  EXPECT_EQ(SendWqeBytes({64, 4, 0}), 192u);   // 48 + 64 + 64
  // Inline: 48 + (4 + data) padded to 16; the larger form wins.
  EXPECT_EQ(SendWqeBytes({64, 1, 306}), 384u);  // 48 + 320 = 368
}

TEST(SendWqeBytes, MaxInlineDataIsWhatTheEntryLeaves) {
  EXPECT_EQ(MaxInlineData({64, 1, 0}), 128u - 48 - 4);
  EXPECT_EQ(MaxInlineData({64, 1, 306}), 384u - 48 - 4);
  EXPECT_GE(MaxInlineData({64, 1, 306}), 306u) << "a whole ATP frame fits inline";
}

TEST(CheckSendQueueShape, TsoHeaderRoomMustHoldTheL2L4Header) {
  EXPECT_EQ(kTsoHeaderBytes, 42u);
  const absl::Status short_header = CheckSendQueueShape({41, 1, 0});
  EXPECT_EQ(short_header.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(short_header).find("max_tso_header = 41"), std::string::npos);
  EXPECT_TRUE(CheckSendQueueShape({42, 1, 0}).ok());
  EXPECT_TRUE(CheckSendQueueShape({0, 1, 0}).ok()) << "no TSO, no header room needed";
}

TEST(CheckSendQueueShape, OneEntryMustFitTheDeviceDescriptorLimit) {
  EXPECT_TRUE(CheckSendQueueShape({64, 1, 306}).ok());
  const absl::Status too_big = CheckSendQueueShape({64, 1, 600});
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(too_big).find("512"), std::string::npos) << too_big;
  EXPECT_FALSE(CheckSendQueueShape({480, 1, 0}).ok());
  EXPECT_FALSE(CheckSendQueueShape({64, 0, 0}).ok()) << "a send needs a gather entry";
}

// --- TSO ---------------------------------------------------------------------

TEST(PlanTso, TakesTheSegmentsAskedForWithinTheDevicesMaxTso) {
  absl::StatusOr<TsoPlan> plan = PlanTso(64, ConnectX5Caps());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->segments_per_request, 64u);
  EXPECT_EQ(plan->slot_bytes % 64, 0u);
  EXPECT_GE(plan->slot_bytes, kTsoHeaderBytes + 64 * kTsoSegmentBytes);

  Mlx5DeviceCaps small = ConnectX5Caps();
  small.max_tso_bytes = 1000;  // 3 segments of 264
  plan = PlanTso(64, small);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->segments_per_request, 3u);
}

TEST(PlanTso, FailsWithoutTsoChecksumOrRoomForOneSegment) {
  Mlx5DeviceCaps caps = ConnectX5Caps();
  caps.max_tso_bytes = 0;
  EXPECT_EQ(PlanTso(64, caps).status().code(), absl::StatusCode::kUnimplemented);
  caps = ConnectX5Caps();
  caps.raw_ip_checksum = false;
  EXPECT_EQ(PlanTso(64, caps).status().code(), absl::StatusCode::kUnimplemented);
  caps = ConnectX5Caps();
  caps.max_tso_bytes = 263;
  EXPECT_EQ(PlanTso(64, caps).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(PlanTso(0, ConnectX5Caps()).status().code(), absl::StatusCode::kInvalidArgument);
}

// --- Striding receive queue ---------------------------------------------------

TEST(PlanMprq, DefaultGeometryPacksFiveStridesPerFrame) {
  absl::StatusOr<MprqGeometry> g = PlanMprq(MprqRequest{6, 9, 1024, 2048}, ConnectX5Caps());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->stride_bytes, 64u);
  EXPECT_EQ(g->strides_per_wqe, 512u);
  EXPECT_EQ(g->wqe_bytes, 32768u);
  EXPECT_EQ(g->strides_per_frame, 5u);  // 306 bytes in 5 x 64
  EXPECT_EQ(g->frames_per_wqe, 102u);   // 512 / 5
  EXPECT_EQ(g->wq_depth, 16u);          // ceil(1024 / 102) = 11 -> 16
  EXPECT_EQ(g->chunks, 16u + 21u);      // + ceil(2048 / 102) for held frames
  EXPECT_EQ(g->cq_entries, 8192u);      // one per stride: 64-byte junk frames cannot overrun it
  EXPECT_EQ(g->memory_bytes(), size_t{37} * 32768);
}

TEST(PlanMprq, StridesAndEntriesArePowersOfTwoWithinTheDeviceRanges) {
  const Mlx5DeviceCaps caps = ConnectX5Caps();
  absl::StatusOr<MprqGeometry> g = PlanMprq(MprqRequest{9, 10, 64, 64}, caps);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->stride_bytes, 512u);
  EXPECT_EQ(g->strides_per_frame, 1u);
  EXPECT_EQ(g->frames_per_wqe, 1024u);
  EXPECT_EQ(g->wq_depth, 2u) << "at least two entries, so one can be re-posted";

  const absl::Status small_stride = PlanMprq(MprqRequest{5, 9, 1024, 1024}, caps).status();
  EXPECT_EQ(small_stride.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(small_stride).find("log_stride_bytes = 5"), std::string::npos);
  EXPECT_NE(Message(small_stride).find("[6, 13]"), std::string::npos);
  const absl::Status few_strides = PlanMprq(MprqRequest{6, 8, 1024, 1024}, caps).status();
  EXPECT_NE(Message(few_strides).find("log_strides_per_wqe = 8"), std::string::npos);
  EXPECT_NE(Message(few_strides).find("[9, 16]"), std::string::npos);
  EXPECT_FALSE(PlanMprq(MprqRequest{14, 9, 1024, 1024}, caps).ok());
  EXPECT_FALSE(PlanMprq(MprqRequest{6, 17, 1024, 1024}, caps).ok());
}

TEST(PlanMprq, AnEntryMustHoldAWholeFrame) {
  Mlx5DeviceCaps caps = ConnectX5Caps();
  caps.min_log_strides_per_wqe = 2;
  const absl::Status s = PlanMprq(MprqRequest{6, 2, 1024, 1024}, caps).status();  // 4 x 64 = 256
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s).find("cannot hold a 306-byte frame"), std::string::npos) << s;
  EXPECT_TRUE(PlanMprq(MprqRequest{7, 2, 1024, 1024}, caps).ok());  // 4 x 128 = 512
}

TEST(PlanMprq, RingsMustFitTheDeviceQueueAndCompletionLimits) {
  Mlx5DeviceCaps caps = ConnectX5Caps();
  caps.max_qp_wr = 8;
  const absl::Status deep = PlanMprq(MprqRequest{6, 9, 4096, 0}, caps).status();  // 41 -> 64
  EXPECT_NE(Message(deep).find("rx_ring_frames = 4096"), std::string::npos) << deep;
  caps = ConnectX5Caps();
  caps.max_cqe = 1000;
  const absl::Status cq = PlanMprq(MprqRequest{6, 9, 1024, 0}, caps).status();
  EXPECT_NE(Message(cq).find("max_cqe = 1000"), std::string::npos) << cq;
}

TEST(PlanMprq, NeedsTheDevicesStridingRq) {
  Mlx5DeviceCaps caps = ConnectX5Caps();
  caps.striding_rq = false;
  EXPECT_EQ(PlanMprq(MprqRequest{}, caps).status().code(), absl::StatusCode::kUnimplemented);
}

// --- Depths ------------------------------------------------------------------

TEST(CheckDepths, BurstFitsBothRingsAndSignalsArriveBeforeTheRingFills) {
  const Mlx5DeviceCaps caps = ConnectX5Caps();
  EXPECT_TRUE(CheckDepths({32, 1024, 32, 1024}, caps).ok());
  EXPECT_TRUE(CheckDepths({64, 64, 32, 64}, caps).ok());
  EXPECT_NE(Message(CheckDepths({65, 64, 32, 1024}, caps)).find("max_burst = 65"),
            std::string::npos);
  EXPECT_NE(Message(CheckDepths({32, 1024, 32, 16}, caps)).find("max_burst = 32"),
            std::string::npos);
  EXPECT_NE(Message(CheckDepths({32, 64, 33, 64}, caps)).find("signal_every = 33"),
            std::string::npos);
  EXPECT_NE(Message(CheckDepths({1, 64, 0, 64}, caps)).find("signal_every = 0"), std::string::npos);
  EXPECT_NE(Message(CheckDepths({32, 65536, 32, 1024}, caps)).find("max_qp_wr"), std::string::npos);
}

TEST(CqEntriesFor, RoundsUpToAPowerOfTwoWithinMaxCqe) {
  Mlx5DeviceCaps caps = ConnectX5Caps();
  EXPECT_EQ(CqEntriesFor(1000, caps), 1024u);
  EXPECT_EQ(CqEntriesFor(1024, caps), 1024u);
  EXPECT_EQ(CqEntriesFor(0, caps), 1u);
  caps.max_cqe = 1023;
  EXPECT_EQ(CqEntriesFor(1000, caps), 0u);
}

// --- Capabilities from verbs ------------------------------------------------

TEST(CapsFromVerbs, CountsTsoAndStridingRqOnlyForRawPacketQps) {
  ibv_device_attr_ex attr{};
  attr.orig_attr.max_qp_wr = 32768;
  attr.orig_attr.max_cqe = 4194303;
  attr.orig_attr.max_sge = 30;
  attr.tso_caps.max_tso = 262144;
  attr.tso_caps.supported_qpts = 1u << IBV_QPT_UD;
  attr.raw_packet_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
  mlx5dv_context dv{};
  dv.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
  dv.striding_rq_caps = {6, 13, 9, 16, 1u << IBV_QPT_UD};

  Mlx5DeviceCaps caps = CapsFromVerbs(attr, dv);
  EXPECT_EQ(caps.max_qp_wr, 32768u);
  EXPECT_EQ(caps.max_cqe, 4194303u);
  EXPECT_EQ(caps.max_tso_bytes, 0u) << "TSO only on UD QPs";
  EXPECT_FALSE(caps.striding_rq) << "striding RQ only on UD QPs";
  EXPECT_TRUE(caps.raw_ip_checksum);

  attr.tso_caps.supported_qpts |= 1u << IBV_QPT_RAW_PACKET;
  dv.striding_rq_caps.supported_qpts |= 1u << IBV_QPT_RAW_PACKET;
  caps = CapsFromVerbs(attr, dv);
  EXPECT_EQ(caps.max_tso_bytes, 262144u);
  EXPECT_TRUE(caps.striding_rq);
  EXPECT_EQ(caps.min_log_stride_bytes, 6u);
  EXPECT_EQ(caps.max_log_strides_per_wqe, 16u);

  dv.comp_mask = 0;  // the provider did not fill striding_rq_caps
  EXPECT_FALSE(CapsFromVerbs(attr, dv).striding_rq);
  attr.raw_packet_caps = 0;
  EXPECT_FALSE(CapsFromVerbs(attr, dv).raw_ip_checksum);
  attr.orig_attr.device_cap_flags = IBV_DEVICE_RAW_IP_CSUM;
  EXPECT_TRUE(CapsFromVerbs(attr, dv).raw_ip_checksum) << "the older flag counts too";
}

}  // namespace
}  // namespace atp::transport::mlx5
