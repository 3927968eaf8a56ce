// tests/transport/mlx5/fake_verbs.h: stand-ins for the NIC, for the mlx5
// datapaths' tests. They fill in the verbs function tables the datapaths call
// through (ibv_qp_ex's wr_* entries, ibv_cq's poll_cq, ibv_wq's post_recv)
// and the mlx5dv rings a striding receive queue uses, and behave as a ConnectX
// would as far as the datapath can tell:
//
//   - FakeSendQueue records each posted batch; Transmit(n) sends the oldest n
//     requests, reading gather entries only then (as a NIC reads by DMA, so a
//     buffer given back too early shows), cutting TSO requests into
//     header + mss segments, and completes the signalled ones;
//   - FakeStridingNic reads the receive entries the driver wrote, packs
//     frames into their strides (a filler CQE when the next frame does not
//     fit), and writes CQEs with the owner bit of each pass;
//   - FakePlainNic takes posted receive buffers and completes them.
#ifndef ATP_TESTS_TRANSPORT_MLX5_FAKE_VERBS_H_
#define ATP_TESTS_TRANSPORT_MLX5_FAKE_VERBS_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "transport/mlx5/rx_path.h"

namespace atp::transport::mlx5::testing {

using Bytes = std::vector<uint8_t>;

// FakeCompletionQueue: an ibv_cq whose ibv_poll_cq returns Push()ed completions.
class FakeCompletionQueue {
 public:
  FakeCompletionQueue();
  FakeCompletionQueue(const FakeCompletionQueue&) = delete;
  FakeCompletionQueue& operator=(const FakeCompletionQueue&) = delete;

  ibv_cq* cq() { return &cq_; }
  void Push(const ibv_wc& wc) { completions_.push_back(wc); }
  size_t waiting() const { return completions_.size(); }

 private:
  static int Poll(ibv_cq* cq, int n, ibv_wc* out);

  ibv_context context_{};
  ibv_cq cq_{};
  std::deque<ibv_wc> completions_;
};

// PostedRequest: one send work request as the fake saw it posted.
struct PostedRequest {
  enum class Kind { kSend, kTso } kind = Kind::kSend;
  uint64_t wr_id = 0;
  unsigned int flags = 0;
  Bytes tso_header;  // kTso: copied at post, like the inline header
  uint16_t mss = 0;
  bool has_inline = false;
  Bytes inline_bytes;  // copied at post
  uint32_t lkey = 0;   // the gather entry, read at Transmit
  uint64_t addr = 0;
  uint32_t length = 0;
};

class FakeSendQueue {
 public:
  FakeSendQueue();
  FakeSendQueue(const FakeSendQueue&) = delete;
  FakeSendQueue& operator=(const FakeSendQueue&) = delete;

  ibv_qp_ex* qpx() { return &qpx_; }
  ibv_cq* cq() { return completion_queue_.cq(); }

  // Transmit: the oldest `n` posted requests (all when n exceeds them) go on
  // the wire; signalled ones complete with `status`. Returns frames sent.
  size_t Transmit(size_t n, ibv_wc_status status = IBV_WC_SUCCESS);
  size_t TransmitAll() { return Transmit(queued_.size()); }

  // FailNextComplete: the next ibv_wr_complete fails (posting nothing).
  void FailNextComplete() { fail_next_complete_ = true; }

  const std::vector<Bytes>& wire() const { return wire_; }
  const std::vector<PostedRequest>& posted() const { return history_; }
  size_t batches() const { return batches_; }
  size_t queued() const { return queued_.size(); }

 private:
  static FakeSendQueue* Self(ibv_qp_ex* qpx);
  static void Start(ibv_qp_ex* qpx);
  static int Complete(ibv_qp_ex* qpx);
  static void Abort(ibv_qp_ex* qpx);
  static void Send(ibv_qp_ex* qpx);
  static void SendTso(ibv_qp_ex* qpx, void* hdr, uint16_t hdr_sz, uint16_t mss);
  static void SetSge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length);
  static void SetInline(ibv_qp_ex* qpx, void* addr, size_t length);

  ibv_qp_ex qpx_{};
  FakeCompletionQueue completion_queue_;
  std::vector<PostedRequest> batch_;    // between wr_start and wr_complete
  std::deque<PostedRequest> queued_;    // posted, not yet sent
  std::vector<PostedRequest> history_;  // everything posted
  std::vector<Bytes> wire_;             // frames sent
  size_t batches_ = 0;
  bool fail_next_complete_ = false;
};

// StridingShape: the fake striding queue's rings.
struct StridingShape {
  uint32_t stride_bytes = 64;
  uint32_t strides_per_wqe = 16;
  uint32_t wq_entries = 2;
  uint32_t cq_entries = 8;
  uint32_t cqe_bytes = 64;
};

class FakeStridingNic {
 public:
  explicit FakeStridingNic(const StridingShape& shape);

  // rings: what StridingRxPath is given (lkey 0x5a5a).
  StridingRings rings();

  // Deliver: the NIC receives `frame`: into the current entry, after a
  // filler CQE when it does not fit the strides left. False (a drop) when no
  // entry is posted or the completion queue is full.
  bool Deliver(std::span<const uint8_t> frame);
  // DeliverError: a receive error CQE (syndrome 0x04, local length).
  void DeliverError();

  // driver_head: the producer counter the driver last wrote to the WQ
  // doorbell record; consumer_index: what it wrote to the CQ's.
  uint32_t driver_head() const;
  uint32_t consumer_index() const;
  uint32_t entries_consumed() const { return entry_; }
  uint32_t cqes_written() const { return cq_pi_; }
  uint64_t drops() const { return drops_; }
  static constexpr uint32_t kLkey = 0x5a5a;

 private:
  bool CqFull() const;
  void WriteCqe(uint8_t opcode, uint32_t byte_cnt, uint16_t wqe_id, uint16_t stride_index);
  void FinishEntryIfFull();

  StridingShape shape_;
  std::vector<uint8_t> wq_;
  std::vector<uint8_t> cq_;
  uint32_t wq_doorbell_ = 0;
  uint32_t cq_doorbell_ = 0;
  uint32_t entry_ = 0;       // entries finished (the current one is entry_)
  uint32_t stride_pos_ = 0;  // strides used in the current entry
  uint32_t cq_pi_ = 0;       // CQEs written
  uint64_t drops_ = 0;
};

// FakePlainNic: an ibv_wq and ibv_cq for PlainRxPath.
class FakePlainNic {
 public:
  FakePlainNic();
  FakePlainNic(const FakePlainNic&) = delete;
  FakePlainNic& operator=(const FakePlainNic&) = delete;

  ibv_wq* wq() { return &wq_; }
  ibv_cq* cq() { return completion_queue_.cq(); }

  // Deliver: copies `frame` into the oldest posted buffer and completes it
  // (`status`); false when nothing is posted.
  bool Deliver(std::span<const uint8_t> frame, ibv_wc_status status = IBV_WC_SUCCESS);
  size_t posted() const { return posted_.size(); }
  // FailPostAfter: ibv_post_wq_recv accepts `n` more entries, then fails.
  void FailPostAfter(size_t n) { fail_after_ = static_cast<long>(n); }

 private:
  static int PostRecv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad);

  ibv_wq wq_{};
  FakeCompletionQueue completion_queue_;
  struct Posted {
    uint64_t wr_id;
    ibv_sge sge;
  };
  std::deque<Posted> posted_;
  long fail_after_ = -1;
};

}  // namespace atp::transport::mlx5::testing

#endif  // ATP_TESTS_TRANSPORT_MLX5_FAKE_VERBS_H_
