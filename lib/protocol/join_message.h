// lib/protocol/join_message.h: the body of a kJoin control frame (worker ->
// PS, one per queue; docs/protocol.md "Failures, runs and restarts"): the
// worker's job configuration, so the PS can name a mismatch, and where its
// queue's stream stands, so a restarted PS (or one serving a new run) can
// rebuild the window slots' generations from it.
//
// Body words (of wire::ControlMessage::body): 0 = io_threads; 1 = slots;
// 2-3 = scale (the IEEE-754 bits of the double, high word first); 4 = the
// layout's fingerprint (LayoutFingerprint); 5-6 = the lowest unacknowledged
// position of the queue; 7-8 = the next position it will send for the first
// time; 9-10 = one past the highest position it has a result for (64-bit
// stream positions, high word first); 11-42 = which positions after the
// lowest unacknowledged one it already has results for (acknowledged out of
// order): bit i % 32 of word 11 + i / 32 = position lowest + 1 + i, for
// i < kJoinAckedBits. A restarted PS needs them: a worker never resends a
// fragment it has the result of. 43-44 = the incarnation of the PS whose join
// request the join answers, 0 for the join a queue sends unasked at its first
// step: a restarted PS reads the frames still queued for the dead one, and a
// join that answered the dead PS describes the stream as it stood then.
#ifndef ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_
#define ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "lib/wire/control_message.h"

namespace atp::protocol {

// kJoinAckedBits: the positions after the lowest unacknowledged one a join
// describes; results beyond them are known only through acked_end.
inline constexpr uint32_t kJoinAckedBits = 1024;

struct JoinBody {
  uint32_t io_threads = 0;
  uint32_t slots = 0;
  double scale = 0.0;
  uint32_t layout_fingerprint = 0;
  uint64_t lowest_unacked = 0;
  uint64_t next_position = 0;
  // acked_end: one past the highest position with a result (lowest_unacked
  // when none after it has one).
  uint64_t acked_end = 0;
  // acked_after_lowest: bit i = position lowest_unacked + 1 + i has a result.
  std::array<uint32_t, kJoinAckedBits / 32> acked_after_lowest{};
  // answers: the incarnation of the PS whose kJoinRequest this join answers;
  // 0 when the worker sent it unasked (at its queue's first step).
  uint64_t answers = 0;

  // HasResult: what the join says about `position`: true below the lowest
  // unacknowledged position and for the acked bits; false at it, at or past
  // acked_end and for clear bits; nullopt beyond the bits (before acked_end).
  std::optional<bool> HasResult(uint64_t position) const;
};

// LayoutFingerprint: FNV-1a over the rack count and each rack's worker count.
uint32_t LayoutFingerprint(std::span<const uint8_t> workers_per_rack);

// EncodeJoin: writes `join` into `control`'s body (its type is set to kJoin).
void EncodeJoin(const JoinBody& join, wire::ControlMessage& control);
// DecodeJoin: false unless `control` is a kJoin.
bool DecodeJoin(const wire::ControlMessage& control, JoinBody* out);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_
