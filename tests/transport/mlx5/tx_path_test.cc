// tests/transport/mlx5/tx_path_test.cc: the send datapath against a fake send
// queue: batching and doorbells, the signalling cadence, buffers held until
// their completion, back-pressure without loss, one TSO request per job,
// software segmentation, inline frames, foreign pools, and errors.
#include "transport/mlx5/tx_path.h"

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/fake_verbs.h"
#include "tests/transport/mlx5/mlx5_test_util.h"

namespace atp::transport::mlx5 {
namespace {

using testing::Bytes;
using testing::FakeSendQueue;
using testing::Frame;
using testing::FrameBytes;
using testing::PostedRequest;

constexpr uint32_t kTxLkey = 0x1111;
constexpr uint32_t kStagingLkey = 0x2222;

Bytes ToBytes(const FrameBytes& frame) { return Bytes(frame.begin(), frame.end()); }

class TxPathTest : public ::testing::Test {
 protected:
  // Make: a path with `config` over a 256-frame tx pool and 4 staging slots.
  void Make(TxPathConfig config, uint32_t staging_slots = 4) {
    FramePoolOptions pool;
    pool.frames = 256;
    tx_pool_ = *HeapFramePool::Create(pool);
    TxPathMemory memory;
    memory.tx_pool = tx_pool_.get();
    memory.tx_lkey = kTxLkey;
    if (config.tso_segments_per_request > 0) {
      const uint32_t slot_bytes =
          static_cast<uint32_t>((TsoSlotBytes(config.tso_segments_per_request) + 63) / 64 * 64);
      staging_.assign(size_t{slot_bytes} * staging_slots, 0);
      memory.staging = staging_;
      memory.staging_slot_bytes = slot_bytes;
      memory.staging_slots = staging_slots;
      memory.staging_lkey = kStagingLkey;
    }
    path_ = std::make_unique<TxPath>(config, memory, nic_.qpx(), nic_.cq(), &stats_);
  }

  // Burst: `n` frames on queue 0 from the tx pool, positions from `first`.
  std::vector<FrameRef> Burst(size_t n, uint32_t first = 0) {
    std::vector<FrameRef> frames(n);
    EXPECT_EQ(tx_pool_->AllocBurst(frames), n);
    for (size_t i = 0; i < n; ++i) {
      const FrameBytes bytes = Frame(0, first + static_cast<uint32_t>(i));
      std::memcpy(frames[i].data, bytes.data(), bytes.size());
      frames[i].length = static_cast<uint32_t>(bytes.size());
    }
    return frames;
  }

  std::vector<Bytes> Expected(size_t n, uint32_t first = 0) {
    std::vector<Bytes> out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(ToBytes(Frame(0, first + static_cast<uint32_t>(i))));
    return out;
  }

  FakeSendQueue nic_;
  QueueStats stats_;
  std::unique_ptr<HeapFramePool> tx_pool_;
  std::vector<uint8_t> staging_;
  std::unique_ptr<TxPath> path_;
};

TEST_F(TxPathTest, ABurstIsPostedAsOneBatchAtFlush) {
  Make({});
  std::vector<FrameRef> frames = Burst(8);
  EXPECT_EQ(path_->TxBurst(frames), 8u);
  EXPECT_EQ(nic_.batches(), 0u) << "nothing leaves before Flush";
  EXPECT_EQ(path_->Flush(), 8u) << "posted, not yet completed";
  EXPECT_EQ(nic_.batches(), 1u) << "one doorbell for the burst";
  ASSERT_EQ(nic_.posted().size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const PostedRequest& r = nic_.posted()[i];
    EXPECT_EQ(r.kind, PostedRequest::Kind::kSend);
    EXPECT_EQ(r.wr_id, i);
    EXPECT_EQ(r.lkey, kTxLkey);
    EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(frames[i].data)) << "zero copy";
    EXPECT_EQ(r.length, 306u);
  }
  EXPECT_EQ(nic_.TransmitAll(), 8u);
  EXPECT_EQ(nic_.wire(), Expected(8));
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
  EXPECT_EQ(stats_.tx_frames, 8u);
}

TEST_F(TxPathTest, CompletionsAreAskedForEveryNAndAtTheEndOfAFlush) {
  TxPathConfig config;
  config.signal_every = 4;
  Make(config);
  std::vector<FrameRef> frames = Burst(10);
  ASSERT_EQ(path_->TxBurst(frames), 10u);
  path_->Flush();
  std::vector<uint64_t> signalled;
  for (const PostedRequest& r : nic_.posted()) {
    if ((r.flags & IBV_SEND_SIGNALED) != 0) signalled.push_back(r.wr_id);
  }
  EXPECT_EQ(signalled, (std::vector<uint64_t>{3, 7, 9}));
}

TEST_F(TxPathTest, BuffersAreHeldUntilASignalledCompletionCoversThem) {
  TxPathConfig config;
  config.signal_every = 4;
  Make(config);
  std::vector<FrameRef> frames = Burst(10);
  ASSERT_EQ(path_->TxBurst(frames), 10u);
  path_->Flush();
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity() - 10);
  nic_.Transmit(3);  // 0..2: unsignalled, no completion yet
  EXPECT_EQ(path_->Flush(), 10u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity() - 10) << "the NIC may still read them";
  nic_.Transmit(1);  // 3: signalled
  EXPECT_EQ(path_->Flush(), 6u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity() - 6);
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
  EXPECT_EQ(nic_.wire(), Expected(10)) << "every buffer was intact when the NIC read it";
}

TEST_F(TxPathTest, AFullRingTakesFewerAndLosesNothing) {
  TxPathConfig config;
  config.depth = 16;
  config.signal_every = 8;
  Make(config);
  std::vector<FrameRef> frames = Burst(20);
  EXPECT_EQ(path_->TxBurst(frames), 16u);
  EXPECT_EQ(stats_.tx_backpressure, 1u);
  EXPECT_EQ(path_->room(), 0u);
  const std::vector<Bytes> expected = Expected(20);
  for (size_t i = 16; i < 20; ++i) {
    EXPECT_EQ(Bytes(frames[i].data, frames[i].data + 306), expected[i]) << "still the caller's";
  }
  path_->Flush();
  EXPECT_EQ(path_->TxBurst({frames.data() + 16, 4}), 0u) << "nothing completed yet";
  nic_.Transmit(8);
  EXPECT_EQ(path_->TxBurst({frames.data() + 16, 4}), 4u) << "a completion made room";
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 4u);
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(nic_.wire(), expected) << "in order, each once";
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
}

TEST_F(TxPathTest, ManyBurstsBetweenFlushesPostWhenTheBatchFills) {
  TxPathConfig config;
  config.max_burst = 8;
  Make(config);
  for (uint32_t b = 0; b < 3; ++b) {
    std::vector<FrameRef> frames = Burst(8, b * 8);
    ASSERT_EQ(path_->TxBurst(frames), 8u);
  }
  EXPECT_EQ(nic_.batches(), 2u) << "the third burst pushed out the first two batches";
  EXPECT_EQ(path_->pending(), 8u);
  path_->Flush();
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u) << "the batch Flush posted ends signalled";
  EXPECT_EQ(nic_.wire(), Expected(24));
}

TEST_F(TxPathTest, BadFramesAreTakenDroppedAndCounted) {
  Make({});
  std::vector<FrameRef> frames = Burst(4);
  frames[1].data[12] = 0x86;  // not IPv4
  frames[2].length = 100;
  EXPECT_EQ(path_->TxBurst(frames), 4u);
  EXPECT_EQ(stats_.tx_bad_frames, 2u);
  EXPECT_EQ(stats_.tx_frames, 2u);
  path_->Flush();
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u);
  const std::vector<Bytes> expected = Expected(4);
  EXPECT_EQ(nic_.wire(), (std::vector<Bytes>{expected[0], expected[3]}));
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
}

TEST_F(TxPathTest, ASegmentationJobIsOneTsoRequest) {
  TxPathConfig config;
  config.tso_segments_per_request = 64;
  Make(config);
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  for (size_t b = 0; b < payload.size(); ++b) payload[b] = static_cast<uint8_t>(b);
  std::vector<const uint8_t*> pointers(10, payload.data());
  std::vector<uint16_t> aggregators = {5, 9, 13, 17, 21, 25, 29, 33, 37, 41};
  const SegmentationJob job = SegmentationJob::FromFrame(Frame(0, 100), pointers, aggregators);
  EXPECT_EQ(path_->TxSegmented(job), 10u);
  path_->Flush();
  ASSERT_EQ(nic_.posted().size(), 1u) << "the whole job in one work request";
  const PostedRequest& r = nic_.posted()[0];
  EXPECT_EQ(r.kind, PostedRequest::Kind::kTso);
  EXPECT_EQ(r.tso_header.size(), 42u);
  EXPECT_EQ(r.mss, 264);
  EXPECT_EQ(r.length, 10u * 264);
  EXPECT_EQ(r.lkey, kStagingLkey);
  EXPECT_NE(r.flags & IBV_SEND_IP_CSUM, 0u) << "the NIC rewrites each IPv4 header";
  EXPECT_NE(r.flags & IBV_SEND_SIGNALED, 0u);
  EXPECT_EQ(nic_.TransmitAll(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    Bytes expected(wire::kFrameBytes);
    WriteSegmentFrame(job, i,
                      std::span<uint8_t, wire::kFrameBytes>(expected.data(), wire::kFrameBytes));
    EXPECT_EQ(nic_.wire()[i], expected) << "segment " << i;
  }
  EXPECT_EQ(stats_.tx_frames, 10u);
  EXPECT_EQ(stats_.tx_segmentation_jobs, 1u);
  EXPECT_EQ(stats_.tx_offloaded_segments, 10u);
  EXPECT_EQ(path_->Flush(), 0u);
}

TEST_F(TxPathTest, ALongJobIsCutIntoRequestsOfAtMostTheSegmentLimit) {
  TxPathConfig config;
  config.tso_segments_per_request = 64;
  Make(config);
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  std::vector<const uint8_t*> pointers(150, payload.data());
  SegmentationJob job = SegmentationJob::FromFrame(Frame(0, 0), pointers);
  EXPECT_EQ(path_->TxSegmented(job), 150u);
  path_->Flush();
  ASSERT_EQ(nic_.posted().size(), 3u);
  EXPECT_EQ(nic_.posted()[0].length, 64u * 264);
  EXPECT_EQ(nic_.posted()[1].length, 64u * 264);
  EXPECT_EQ(nic_.posted()[2].length, 22u * 264);
  EXPECT_EQ(nic_.TransmitAll(), 150u);
  for (size_t i = 0; i < 150; ++i) {
    Bytes expected(wire::kFrameBytes);
    WriteSegmentFrame(job, i,
                      std::span<uint8_t, wire::kFrameBytes>(expected.data(), wire::kFrameBytes));
    ASSERT_EQ(nic_.wire()[i], expected) << "segment " << i;
  }
}

TEST_F(TxPathTest, StagingSlotsInFlightBackPressureTheJob) {
  TxPathConfig config;
  config.tso_segments_per_request = 8;
  Make(config, /*staging_slots=*/2);
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  std::vector<const uint8_t*> pointers(40, payload.data());
  SegmentationJob job = SegmentationJob::FromFrame(Frame(0, 0), pointers);
  const SegmentationJob whole = job;
  size_t sent = path_->TxSegmented(job);
  EXPECT_EQ(sent, 16u) << "two slots of 8";
  EXPECT_EQ(stats_.tx_backpressure, 1u);
  job.Advance(sent);
  path_->Flush();
  nic_.TransmitAll();
  while (!job.empty()) {
    sent = path_->TxSegmented(job);
    ASSERT_GT(sent, 0u);
    job.Advance(sent);
    path_->Flush();
    nic_.TransmitAll();
  }
  EXPECT_EQ(path_->Flush(), 0u);
  ASSERT_EQ(nic_.wire().size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    Bytes expected(wire::kFrameBytes);
    WriteSegmentFrame(whole, i,
                      std::span<uint8_t, wire::kFrameBytes>(expected.data(), wire::kFrameBytes));
    ASSERT_EQ(nic_.wire()[i], expected) << "segment " << i;
  }
}

TEST_F(TxPathTest, WithoutTsoEachSegmentIsAFrameOfTheTxPool) {
  Make({});
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  payload[0] = 0xEE;
  std::vector<const uint8_t*> pointers(5, payload.data());
  const SegmentationJob job = SegmentationJob::FromFrame(Frame(0, 7), pointers);
  EXPECT_EQ(path_->TxSegmented(job), 5u);
  EXPECT_EQ(stats_.tx_offloaded_segments, 0u);
  path_->Flush();
  ASSERT_EQ(nic_.posted().size(), 5u);
  for (const PostedRequest& r : nic_.posted()) {
    EXPECT_EQ(r.kind, PostedRequest::Kind::kSend);
    EXPECT_EQ(r.lkey, kTxLkey);
  }
  nic_.TransmitAll();
  for (size_t i = 0; i < 5; ++i) {
    Bytes expected(wire::kFrameBytes);
    WriteSegmentFrame(job, i,
                      std::span<uint8_t, wire::kFrameBytes>(expected.data(), wire::kFrameBytes));
    EXPECT_EQ(nic_.wire()[i], expected);
  }
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
}

TEST_F(TxPathTest, AnInvalidJobIsTakenWholeAndCountedBad) {
  TxPathConfig config;
  config.tso_segments_per_request = 64;
  Make(config);
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  std::vector<const uint8_t*> pointers(3, payload.data());
  FrameBytes first = Frame(0, 0);
  first[wire::kAtpOffset] = 0;  // job 0
  EXPECT_EQ(path_->TxSegmented(SegmentationJob::FromFrame(first, pointers)), 3u);
  EXPECT_EQ(stats_.tx_bad_frames, 3u);
  path_->Flush();
  EXPECT_TRUE(nic_.posted().empty());
}

TEST_F(TxPathTest, InlineFramesGoBackToThePoolOnceTheyArePosted) {
  TxPathConfig config;
  config.max_inline_frame = 306;
  Make(config);
  std::vector<FrameRef> frames = Burst(4);
  ASSERT_EQ(path_->TxBurst(frames), 4u);
  EXPECT_EQ(path_->Flush(), 4u) << "posted, not completed";
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity()) << "the bytes are in the requests";
  for (const PostedRequest& r : nic_.posted()) EXPECT_TRUE(r.has_inline);
  // Reuse the buffers at once: the wire still gets the original frames.
  std::vector<FrameRef> scribble = Burst(4, 50);
  ReleaseFrames(scribble);
  nic_.TransmitAll();
  EXPECT_EQ(nic_.wire(), Expected(4));
  EXPECT_EQ(path_->Flush(), 0u);
}

TEST_F(TxPathTest, FramesOfOtherRegisteredPoolsGoWithoutACopy) {
  Make({});
  auto other = *HeapFramePool::Create({});
  LkeyTable lkeys;
  lkeys.Add(other->region().data(), other->region().size(), 0x3333);
  path_->set_lkeys(&lkeys);
  FrameRef frame;
  ASSERT_TRUE(other->Alloc(&frame));
  const FrameBytes bytes = Frame(0, 1);
  std::memcpy(frame.data, bytes.data(), bytes.size());
  frame.length = 306;
  ASSERT_EQ(path_->TxBurst({&frame, 1}), 1u);
  path_->Flush();
  ASSERT_EQ(nic_.posted().size(), 1u);
  EXPECT_EQ(nic_.posted()[0].lkey, 0x3333u);
  EXPECT_EQ(nic_.posted()[0].addr, reinterpret_cast<uintptr_t>(frame.data));
  EXPECT_EQ(other->free_count(), other->capacity() - 1) << "held until completed";
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(other->free_count(), other->capacity());
  EXPECT_EQ(nic_.wire()[0], ToBytes(bytes));
}

TEST_F(TxPathTest, FramesOfUnregisteredMemoryAreCopiedIntoTheTxPool) {
  Make({});
  auto other = *HeapFramePool::Create({});
  FrameRef frame;
  ASSERT_TRUE(other->Alloc(&frame));
  const FrameBytes bytes = Frame(0, 2);
  std::memcpy(frame.data, bytes.data(), bytes.size());
  frame.length = 306;
  ASSERT_EQ(path_->TxBurst({&frame, 1}), 1u);
  EXPECT_EQ(other->free_count(), other->capacity()) << "the original went back at once";
  path_->Flush();
  EXPECT_EQ(nic_.posted()[0].lkey, kTxLkey);
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(nic_.wire()[0], ToBytes(bytes));
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
}

TEST_F(TxPathTest, AnErrorCompletionLosesTheQueueButGivesEveryBufferBack) {
  TxPathConfig config;
  config.signal_every = 4;
  Make(config);
  std::vector<FrameRef> frames = Burst(8);
  ASSERT_EQ(path_->TxBurst(frames), 8u);
  path_->Flush();
  nic_.Transmit(4, IBV_WC_GENERAL_ERR);
  EXPECT_EQ(path_->Flush(), 0u) << "nothing more will complete";
  EXPECT_EQ(stats_.tx_errors, 8u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
  std::vector<FrameRef> more = Burst(2, 8);
  EXPECT_EQ(path_->TxBurst(more), 2u);
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(stats_.tx_errors, 10u) << "later frames are dropped and counted";
  EXPECT_EQ(nic_.posted().size(), 8u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
}

TEST_F(TxPathTest, ARefusedPostGivesTheBatchBackAsErrors) {
  Make({});
  std::vector<FrameRef> frames = Burst(3);
  ASSERT_EQ(path_->TxBurst(frames), 3u);
  nic_.FailNextComplete();
  EXPECT_EQ(path_->Flush(), 0u);
  EXPECT_EQ(stats_.tx_errors, 3u);
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
  std::vector<FrameRef> again = Burst(3);
  ASSERT_EQ(path_->TxBurst(again), 3u);
  path_->Flush();
  nic_.TransmitAll();
  EXPECT_EQ(path_->Flush(), 0u) << "the queue still works";
  EXPECT_EQ(nic_.wire(), Expected(3));
}

TEST_F(TxPathTest, StopGivesBackPendingAndPostedFrames) {
  TxPathConfig config;
  config.tso_segments_per_request = 8;
  Make(config);
  std::vector<FrameRef> frames = Burst(5);
  ASSERT_EQ(path_->TxBurst(frames), 5u);
  path_->Flush();  // posted
  std::vector<FrameRef> more = Burst(3, 5);
  ASSERT_EQ(path_->TxBurst(more), 3u);  // pending
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  std::vector<const uint8_t*> pointers(8, payload.data());
  ASSERT_EQ(path_->TxSegmented(SegmentationJob::FromFrame(Frame(0, 9), pointers)), 8u);
  path_->Stop();
  EXPECT_EQ(tx_pool_->free_count(), tx_pool_->capacity());
  EXPECT_EQ(path_->frames_outstanding(), 0u);
  EXPECT_EQ(path_->pending(), 0u);
}

}  // namespace
}  // namespace atp::transport::mlx5
