#include "lib/protocol/op_begin_message.h"

namespace atp::protocol {
namespace {

void Put64(wire::ControlMessage& control, size_t word, uint64_t value) {
  control.body[word] = static_cast<uint32_t>(value >> 32);
  control.body[word + 1] = static_cast<uint32_t>(value);
}
uint64_t Get64(const wire::ControlMessage& control, size_t word) {
  return (uint64_t{control.body[word]} << 32) | control.body[word + 1];
}

}  // namespace

void EncodeOpBegin(const OpBeginBody& body, wire::ControlMessage& control) {
  control.type = wire::ControlType::kOpBegin;
  control.body.fill(0);
  Put64(control, 0, body.piece);
  Put64(control, 2, body.first_position);
  Put64(control, 4, body.positions);
  Put64(control, 6, body.op_values);
}

bool DecodeOpBegin(const wire::ControlMessage& control, OpBeginBody* out) {
  if (control.type != wire::ControlType::kOpBegin) return false;
  out->piece = Get64(control, 0);
  out->first_position = Get64(control, 2);
  out->positions = Get64(control, 4);
  out->op_values = Get64(control, 6);
  return true;
}

}  // namespace atp::protocol
