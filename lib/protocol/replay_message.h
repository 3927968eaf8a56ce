// lib/protocol/replay_message.h: the body of a kReplay control frame (worker
// -> PS; docs/protocol.md "Failures, runs and restarts"): a parameter packet
// that an earlier PS completed and this worker received, sent back to a
// restarted PS that asked for it (kStatus kReplayRequest), so that the
// workers that lost it get exactly the values the others got.
//
// A parameter packet (16 header bytes and 62 words) does not fit in one
// control body (58 words), so a replay travels as two parts, each with the
// packet's header and position and half of its words:
//
//   for (const ReplayPart& part : SplitReplay(position, header, wire_payload)) {
//     wire::ControlMessage control;
//     EncodeReplay(part, control);
//     ... send control (seq: the queue and position's low 20 bits) ...
//   }
//   // at the PS:
//   ReplayPart part;
//   if (DecodeReplay(control, &part))
//     if (std::optional<wire::AtpMessage> packet = assembler.Add(part)) Apply(*packet);
//
// Body words: 0 = the part (0: words 0..30 of the payload, 1: words 31..61);
// 1-2 = the 64-bit stream position (high word first); 3-6 = the packet's 16
// ATP header bytes as four big-endian words; 7-37 = the part's 31 payload
// words (the payload as on the wire: int32 sums or float32 bits).
#ifndef ATP_LIB_PROTOCOL_REPLAY_MESSAGE_H_
#define ATP_LIB_PROTOCOL_REPLAY_MESSAGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "atp/wire.h"
#include "lib/wire/control_message.h"

namespace atp::protocol {

inline constexpr size_t kReplayParts = 2;
inline constexpr size_t kReplayWordsPerPart = wire::kValuesPerFragment / kReplayParts;  // 31
static_assert(kReplayWordsPerPart * kReplayParts == wire::kValuesPerFragment);

// ReplayPart: one half of a replayed parameter packet.
struct ReplayPart {
  uint32_t part = 0;        // 0 or 1
  uint64_t position = 0;    // the fragment's 64-bit stream position in its queue
  wire::AtpHeader header;   // the parameter packet's header, as received
  std::array<uint32_t, kReplayWordsPerPart> words{};  // payload words part*31 .. part*31+30

  bool operator==(const ReplayPart&) const = default;
};

// SplitReplay: the two parts of the parameter packet `header` + `wire_payload`
// (its 248 payload bytes, big-endian) received for stream position `position`.
std::array<ReplayPart, kReplayParts> SplitReplay(
    uint64_t position, const wire::AtpHeader& header,
    std::span<const uint8_t, wire::kPayloadBytes> wire_payload);

// EncodeReplay: writes `part` into `control`'s body (its type is set to kReplay).
void EncodeReplay(const ReplayPart& part, wire::ControlMessage& control);
// DecodeReplay: false unless `control` is a kReplay with a part number 0 or 1.
bool DecodeReplay(const wire::ControlMessage& control, ReplayPart* out);

// ReplayAssembler: joins the two parts of replayed packets. Holds at most
// `capacity` incomplete packets (the oldest is forgotten first: a part lost
// on the way is asked for again). Not thread-safe.
class ReplayAssembler {
 public:
  explicit ReplayAssembler(size_t capacity = 64) : capacity_(capacity) {}

  // Add: the whole packet once both parts of the same (job, queue, position)
  // with the same header arrived; nullopt before. Parts whose headers
  // disagree start the packet over.
  std::optional<wire::AtpMessage> Add(const ReplayPart& part);

  size_t incomplete() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t position = 0;
    wire::AtpHeader header;
    uint32_t parts = 0;  // bit i: part i arrived
    wire::Payload payload{};
  };
  size_t capacity_;
  std::vector<Entry> entries_;  // oldest first
};

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_REPLAY_MESSAGE_H_
