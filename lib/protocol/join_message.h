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
// time (64-bit stream positions, high word first).
#ifndef ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_
#define ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_

#include <cstdint>
#include <span>

#include "lib/wire/control_message.h"

namespace atp::protocol {

struct JoinBody {
  uint32_t io_threads = 0;
  uint32_t slots = 0;
  double scale = 0.0;
  uint32_t layout_fingerprint = 0;
  uint64_t lowest_unacked = 0;
  uint64_t next_position = 0;
};

// LayoutFingerprint: FNV-1a over the rack count and each rack's worker count.
uint32_t LayoutFingerprint(std::span<const uint8_t> workers_per_rack);

// EncodeJoin: writes `join` into `control`'s body (its type is set to kJoin).
void EncodeJoin(const JoinBody& join, wire::ControlMessage& control);
// DecodeJoin: false unless `control` is a kJoin.
bool DecodeJoin(const wire::ControlMessage& control, JoinBody* out);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_JOIN_MESSAGE_H_
