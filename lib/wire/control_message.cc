// lib/wire/control_message.cc: building and decoding control messages.
#include "lib/wire/control_message.h"

namespace atp::wire {
namespace {

constexpr int kMagicShift = 16;
constexpr int kVersionShift = 8;

// ControlHeader: the header fields every control frame shares.
AtpHeader ControlHeader(uint8_t job, uint8_t fan_in0, uint8_t fan_in1, uint32_t queue,
                        uint32_t position) {
  AtpHeader header;
  header.job = job;
  header.seq = MakeSeq(queue, position);
  header.fan_in0 = fan_in0;
  header.fan_in1 = fan_in1;
  header.fp = true;
  header.resend = true;
  header.collision = true;
  return header;
}

void WriteControlPayload(const ControlMessage& control, Payload& payload) {
  payload[0] = (kControlMagic << kMagicShift) | (uint32_t{kControlVersion} << kVersionShift) |
               static_cast<uint32_t>(control.type);
  payload[1] = control.sender;
  payload[2] = static_cast<uint32_t>(control.incarnation >> 32);
  payload[3] = static_cast<uint32_t>(control.incarnation);
  for (size_t i = 0; i < kControlBodyWords; ++i) {
    payload[kControlHeaderWords + i] = control.body[i];
  }
}

}  // namespace

std::string_view ControlErrorName(ControlError error) {
  switch (error) {
    case ControlError::kOk:
      return "ok";
    case ControlError::kNotControl:
      return "not_control";
    case ControlError::kBadMagic:
      return "bad_magic";
    case ControlError::kBadVersion:
      return "bad_version";
    case ControlError::kUnknownType:
      return "unknown_type";
    case ControlError::kBadDirection:
      return "bad_direction";
  }
  return "unknown";
}

AtpMessage MakeWorkerControl(uint8_t job, const ControlSender& sender, uint32_t queue,
                             uint32_t position, const ControlMessage& control) {
  AtpMessage message;
  message.header = ControlHeader(job, sender.fan_in0, sender.fan_in1, queue, position);
  message.header.bitmap0 = uint32_t{1} << (sender.worker_in_rack % kMaxFanIn);
  message.header.bitmap1 = uint32_t{1} << (sender.rack % kMaxFanIn);
  WriteControlPayload(control, message.payload);
  return message;
}

AtpMessage MakePsControl(uint8_t job, uint8_t fan_in0, uint8_t fan_in1, uint32_t queue,
                         uint32_t position, const ControlMessage& control) {
  AtpMessage message;
  message.header = ControlHeader(job, fan_in0, fan_in1, queue, position);
  message.header.ack = true;
  WriteControlPayload(control, message.payload);
  return message;
}

ControlError DecodeControl(const AtpMessage& message, ControlMessage* out) {
  if (!IsControl(message.header)) return ControlError::kNotControl;
  const uint32_t word0 = message.payload[0];
  if ((word0 >> kMagicShift) != kControlMagic) return ControlError::kBadMagic;
  if (((word0 >> kVersionShift) & 0xFF) != kControlVersion) return ControlError::kBadVersion;
  const uint8_t type = static_cast<uint8_t>(word0 & 0xFF);
  if (type == 0 || type > kMaxControlType) return ControlError::kUnknownType;
  const uint32_t sender = message.payload[1];
  // The PS speaks with ack set, workers without.
  if (message.header.ack != (sender == kControlSenderPs)) return ControlError::kBadDirection;
  out->type = static_cast<ControlType>(type);
  out->sender = sender;
  out->incarnation = (uint64_t{message.payload[2]} << 32) | message.payload[3];
  for (size_t i = 0; i < kControlBodyWords; ++i) {
    out->body[i] = message.payload[kControlHeaderWords + i];
  }
  return ControlError::kOk;
}

}  // namespace atp::wire
