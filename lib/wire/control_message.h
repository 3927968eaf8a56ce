// lib/wire/control_message.h: control messages, the ATP frames that carry a
// job's control (pulls, joins, status, replays) instead of values (docs/protocol.md,
// "Control frames").
//
// A control frame is an ordinary 306-byte ATP frame (ATP-SPEC section 2) whose
// header has fp, resend and collision all set. No data packet carries that
// combination: a worker's fp rows never carry collision, a switch forwards fp
// packets untouched (rule 3) so it never adds collision to one, and the PS's
// fp parameter packets never carry resend. Because fp is set, every switch
// already moves a control frame the right way without aggregating it: toward
// the PS when ack is clear (rule 3), multicast to the job's workers when ack
// is set (rule 2; a switch must not release an aggregator for a control frame,
// see IsControl).
//
//   worker -> PS: ack 0, edge 0, bitmap0 = the worker's bit, bitmap1 = its
//                 rack's bit, fan-ins = the job's shape (a valid level-1
//                 gradient header, so every check on the way passes it).
//   PS -> workers: ack 1, empty bitmaps, fan-ins = the job's shape.
//   Both: seq = the queue it concerns (its top 4 bits steer it to that queue's
//   UDP port) and a position the type defines; aggregator 0; ecn clear.
//
// The 62 payload words (big-endian on the wire, host order in wire::Payload)
// hold: word 0 = kControlMagic (16 bits) | version (8) | type (8); word 1 = the
// sender (a worker's global index, or kControlSenderPs); words 2-3 = the
// sender's incarnation (a random 64-bit number chosen when the process starts
// its Worker or PS, high word first); words 4..61 = the type's body.
//
//   wire::AtpMessage m = wire::MakeWorkerControl(job, sender_bits, queue,
//                                                position, control);
//   ...
//   if (wire::IsControl(m.header)) {
//     wire::ControlMessage c;
//     if (wire::DecodeControl(m, &c) != wire::ControlError::kOk) ++bad; else Handle(c);
//   }
//
// The engines never see control frames: the hosts (lib/host) divert them to
// whoever handles them, and an engine given one counts and ignores it.
#ifndef ATP_LIB_WIRE_CONTROL_MESSAGE_H_
#define ATP_LIB_WIRE_CONTROL_MESSAGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "atp/wire.h"

namespace atp::wire {

inline constexpr uint32_t kControlMagic = 0xA7C0;  // "ATP control"
inline constexpr uint8_t kControlVersion = 1;
inline constexpr uint32_t kControlSenderPs = 0xFFFFFFFF;
inline constexpr size_t kControlHeaderWords = 4;
inline constexpr size_t kControlBodyWords = kValuesPerFragment - kControlHeaderWords;  // 58

// ControlType: what a control message asks or says. Values are wire values:
// never renumber; add new types at the end.
enum class ControlType : uint8_t {
  // Worker -> PS: "send me the parameter packet of (queue, position) again".
  // For a worker that contributed nothing to that fragment and so cannot ask
  // with a resend (SkipReduce's contribution variant). Body: unused.
  kPull = 1,
  // Worker -> PS: the worker's identity and job configuration (a join).
  kJoin = 2,
  // PS -> workers: what the PS knows about the job (waiting for named
  // workers, a mismatch, a restart).
  kStatus = 3,
  // Worker -> PS: where an operation starts in a queue's stream and its size.
  kOpBegin = 4,
  // Worker -> PS: half of a parameter packet the worker received from an
  // earlier PS, replayed after a restart so that the workers that lost it
  // get the very same values (lib/protocol/replay_message.h).
  kReplay = 5,
};
inline constexpr uint8_t kMaxControlType = static_cast<uint8_t>(ControlType::kReplay);

// ControlMessage: a decoded control payload.
struct ControlMessage {
  ControlType type = ControlType::kPull;
  uint32_t sender = 0;       // worker global index, or kControlSenderPs
  uint64_t incarnation = 0;  // the sender process's random identity
  std::array<uint32_t, kControlBodyWords> body{};
};

enum class ControlError : uint8_t {
  kOk = 0,
  kNotControl,     // the header is not a control frame's (see IsControl)
  kBadMagic,       // word 0 does not start with kControlMagic
  kBadVersion,     // a version this build does not speak
  kUnknownType,    // a type this build does not know
  kBadDirection,   // ack does not match the sender (PS <-> kControlSenderPs)
};
std::string_view ControlErrorName(ControlError error);

// IsControl: the header is a control frame's (fp, resend and collision set).
constexpr bool IsControl(const AtpHeader& header) {
  return header.fp && header.resend && header.collision;
}

// ControlSender: where a worker's control frames come from in the job's
// shape: its bit in bitmap0 (index within its rack) and bitmap1 (its rack),
// and the job's fan-ins.
struct ControlSender {
  uint32_t worker_in_rack = 0;  // 0..fan_in0-1
  uint32_t rack = 0;            // 0..fan_in1-1
  uint8_t fan_in0 = 1;          // workers in the sender's rack
  uint8_t fan_in1 = 1;          // racks in the job
};

// MakeWorkerControl / MakePsControl: a control frame's message, with the
// header described above. `queue` < 16, `position` < 2^20 (masked).
AtpMessage MakeWorkerControl(uint8_t job, const ControlSender& sender, uint32_t queue,
                             uint32_t position, const ControlMessage& control);
AtpMessage MakePsControl(uint8_t job, uint8_t fan_in0, uint8_t fan_in1, uint32_t queue,
                         uint32_t position, const ControlMessage& control);

// DecodeControl: the control payload of `message`, checked (the header must
// already be valid: ValidateHeader). On error `out` is unspecified.
ControlError DecodeControl(const AtpMessage& message, ControlMessage* out);

}  // namespace atp::wire

#endif  // ATP_LIB_WIRE_CONTROL_MESSAGE_H_
