// lib/protocol/op_begin_message.h: the body of a kOpBegin control frame
// (worker -> PS, one per piece of an operation a queue takes; docs/protocol.md
// "Failures, runs and restarts"): where the piece starts in the queue's
// stream and how large it and its operation are, so that the PS can confirm
// that every worker cut the same operation the same way before any worker
// delivers its result.
//
// Body words: 0-1 = the piece's number in the queue (0, 1, 2, ... since the
// Worker started); 2-3 = its first stream position; 4-5 = the positions it
// takes (its fragments, SkipReduce's dropped ones excluded); 6-7 = the values
// of the whole operation (64-bit, high word first).
#ifndef ATP_LIB_PROTOCOL_OP_BEGIN_MESSAGE_H_
#define ATP_LIB_PROTOCOL_OP_BEGIN_MESSAGE_H_

#include <cstdint>

#include "lib/wire/control_message.h"

namespace atp::protocol {

struct OpBeginBody {
  uint64_t piece = 0;
  uint64_t first_position = 0;
  uint64_t positions = 0;
  uint64_t op_values = 0;

  bool operator==(const OpBeginBody&) const = default;
};

void EncodeOpBegin(const OpBeginBody& body, wire::ControlMessage& control);
// DecodeOpBegin: false unless `control` is a kOpBegin.
bool DecodeOpBegin(const wire::ControlMessage& control, OpBeginBody* out);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_OP_BEGIN_MESSAGE_H_
