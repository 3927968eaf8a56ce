// transport/mlx5/tx_request.h: send work requests, built as plain data before
// they are posted (the datapath then only copies them into ibv_wr_* calls).
// Pure (no device): every layout is unit-tested. Private to transport/mlx5.
//
// Three kinds:
//   - kSend: one frame from registered memory, one gather entry;
//   - kSendInline: one small frame copied into the work request itself (no
//     DMA read; the buffer goes back to its pool as soon as it is posted);
//   - kTso: a segmentation job's k segments. The job is written into a
//     registered staging slot as its 42-byte L2-L4 header followed by k
//     264-byte ATP messages (the per-segment seq and aggregator already in
//     place); the request carries the header inline (hdr/hdr_sz), mss 264 and
//     one gather entry over the k messages. The NIC sends k frames, each the
//     header + one message: byte for byte segment i of the job, but for the
//     IPv4 identification/checksum and the UDP checksum it may fill in.
//
//   TxRequest r = BuildTsoRequest(job, 0, k, slots.slot(s), s, staging_lkey);
//   ibv_wr_send_tso(qpx, r.tso_header, r.tso_header_bytes, r.mss);
//   ibv_wr_set_sge(qpx, r.sge.lkey, r.sge.addr, r.sge.length);
#ifndef ATP_TRANSPORT_MLX5_TX_REQUEST_H_
#define ATP_TRANSPORT_MLX5_TX_REQUEST_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "atp/transport/frame_pool.h"
#include "atp/transport/segmentation.h"
#include "transport/mlx5/geometry.h"
#include "transport/mlx5/tx_tracker.h"

namespace atp::transport::mlx5 {

enum class TxOpcode : uint8_t { kSend, kSendInline, kTso };

// TxRequest: one send work request, ready to post.
struct TxRequest {
  TxOpcode opcode = TxOpcode::kSend;
  // kSend / kTso: the gather entry. kSendInline: the bytes to copy (lkey unused).
  ibv_sge sge{};
  // kTso: the header the NIC puts in front of every segment, and the segment size.
  const uint8_t* tso_header = nullptr;
  uint16_t tso_header_bytes = 0;
  uint16_t mss = 0;
  // record: what the request holds until it completes.
  TxRecord record;
  // release_at_post: a frame given back once the request is posted (inline);
  // pool null: none.
  FrameRef release_at_post;
};

// BuildFrameRequest: a whole frame in registered memory (`lkey`); inline when
// frame.length <= max_inline_frame (0: never).
TxRequest BuildFrameRequest(const FrameRef& frame, uint32_t lkey, uint32_t max_inline_frame);

// kTsoSlotHeaderOffset / kTsoSlotMessagesOffset: the layout of a staging slot.
// With one segment the slot's first 306 bytes are exactly that segment's frame.
inline constexpr size_t kTsoSlotHeaderOffset = 0;
inline constexpr size_t kTsoSlotMessagesOffset = kTsoHeaderBytes;

// TsoSlotBytes: the staging bytes `segments` segments need.
constexpr size_t TsoSlotBytes(size_t segments) {
  return kTsoSlotMessagesOffset + segments * kTsoSegmentBytes;
}

// BuildTsoRequest: writes segments [first, first + count) of `job` into
// `slot` (>= TsoSlotBytes(count) bytes of registered memory, `lkey`) and
// returns the request: kTso for count >= 2, a kSend of the one whole frame
// for count == 1. The record holds `count` frames and `slot_index`.
TxRequest BuildTsoRequest(const SegmentationJob& job, size_t first, size_t count,
                          std::span<uint8_t> slot, uint32_t slot_index, uint32_t lkey);

// LkeyTable: the memory regions registered with a device, to find the lkey of
// a frame that came from any of its pools. A handful of regions; linear search.
class LkeyTable {
 public:
  void Add(const void* begin, size_t bytes, uint32_t lkey);
  // Find: the lkey of the region holding all of [data, data + length).
  std::optional<uint32_t> Find(const uint8_t* data, size_t length) const;
  size_t size() const { return regions_.size(); }

 private:
  struct Region {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    uint32_t lkey = 0;
  };
  std::vector<Region> regions_;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_TX_REQUEST_H_
