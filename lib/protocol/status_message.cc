#include "lib/protocol/status_message.h"

namespace atp::protocol {
namespace {

constexpr size_t kKindWord = 0;
constexpr size_t kPositionWord = 1;
constexpr size_t kWorkersWord = 2;
constexpr size_t kFieldWord = kWorkersWord + WorkerSet::kWords;  // 34
constexpr size_t kExpectedWord = kFieldWord + 1;
constexpr size_t kReceivedWord = kExpectedWord + 2;
constexpr size_t kRunWord = kReceivedWord + 2;  // 39
static_assert(kRunWord + 2 <= wire::kControlBodyWords);

}  // namespace

const char* MismatchFieldName(uint32_t field) {
  switch (static_cast<MismatchField>(field)) {
    case MismatchField::kSlots:
      return "slots";
    case MismatchField::kLayout:
      return "layout";
    case MismatchField::kIoThreads:
      return "io_threads";
    case MismatchField::kScale:
      return "scale";
    case MismatchField::kOperationSize:
      return "operation_size";
    case MismatchField::kOperationPieces:
      return "operation_pieces";
  }
  return "unknown";
}

void EncodeStatus(const StatusBody& status, wire::ControlMessage& control) {
  control.type = wire::ControlType::kStatus;
  control.body.fill(0);
  control.body[kKindWord] = static_cast<uint32_t>(status.kind);
  control.body[kPositionWord] = status.position & wire::kPositionMask;
  for (size_t i = 0; i < WorkerSet::kWords; ++i) {
    control.body[kWorkersWord + i] = status.workers.words()[i];
  }
  control.body[kFieldWord] = status.field;
  control.body[kExpectedWord] = static_cast<uint32_t>(status.expected >> 32);
  control.body[kExpectedWord + 1] = static_cast<uint32_t>(status.expected);
  control.body[kReceivedWord] = static_cast<uint32_t>(status.received >> 32);
  control.body[kReceivedWord + 1] = static_cast<uint32_t>(status.received);
  control.body[kRunWord] = static_cast<uint32_t>(status.run >> 32);
  control.body[kRunWord + 1] = static_cast<uint32_t>(status.run);
}

bool DecodeStatus(const wire::ControlMessage& control, StatusBody* out) {
  if (control.type != wire::ControlType::kStatus) return false;
  const uint32_t kind = control.body[kKindWord];
  if (kind == 0 || kind > kMaxStatusKind) return false;
  out->kind = static_cast<StatusKind>(kind);
  out->position = control.body[kPositionWord] & wire::kPositionMask;
  for (size_t i = 0; i < WorkerSet::kWords; ++i) {
    out->workers.words()[i] = control.body[kWorkersWord + i];
  }
  out->field = control.body[kFieldWord];
  out->expected = (uint64_t{control.body[kExpectedWord]} << 32) | control.body[kExpectedWord + 1];
  out->received = (uint64_t{control.body[kReceivedWord]} << 32) | control.body[kReceivedWord + 1];
  out->run = (uint64_t{control.body[kRunWord]} << 32) | control.body[kRunWord + 1];
  return true;
}

}  // namespace atp::protocol
