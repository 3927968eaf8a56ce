#include "lib/protocol/join_message.h"

#include <algorithm>
#include <bit>

namespace atp::protocol {
namespace {

constexpr size_t kAckedWord = 11;
constexpr size_t kAnswersWord = kAckedWord + kJoinAckedBits / 32;
static_assert(kAnswersWord + 2 <= wire::kControlBodyWords);

void Put64(wire::ControlMessage& control, size_t word, uint64_t value) {
  control.body[word] = static_cast<uint32_t>(value >> 32);
  control.body[word + 1] = static_cast<uint32_t>(value);
}
uint64_t Get64(const wire::ControlMessage& control, size_t word) {
  return (uint64_t{control.body[word]} << 32) | control.body[word + 1];
}

}  // namespace

uint32_t LayoutFingerprint(std::span<const uint8_t> workers_per_rack) {
  constexpr uint32_t kOffset = 2166136261u;
  constexpr uint32_t kPrime = 16777619u;
  uint32_t hash = kOffset;
  auto mix = [&](uint8_t byte) { hash = (hash ^ byte) * kPrime; };
  mix(static_cast<uint8_t>(workers_per_rack.size()));
  for (uint8_t w : workers_per_rack) mix(w);
  return hash;
}

void EncodeJoin(const JoinBody& join, wire::ControlMessage& control) {
  control.type = wire::ControlType::kJoin;
  control.body.fill(0);
  control.body[0] = join.io_threads;
  control.body[1] = join.slots;
  Put64(control, 2, std::bit_cast<uint64_t>(join.scale));
  control.body[4] = join.layout_fingerprint;
  Put64(control, 5, join.lowest_unacked);
  Put64(control, 7, join.next_position);
  Put64(control, 9, join.acked_end);
  std::copy(join.acked_after_lowest.begin(), join.acked_after_lowest.end(),
            control.body.begin() + kAckedWord);
  Put64(control, kAnswersWord, join.answers);
}

bool DecodeJoin(const wire::ControlMessage& control, JoinBody* out) {
  if (control.type != wire::ControlType::kJoin) return false;
  out->io_threads = control.body[0];
  out->slots = control.body[1];
  out->scale = std::bit_cast<double>(Get64(control, 2));
  out->layout_fingerprint = control.body[4];
  out->lowest_unacked = Get64(control, 5);
  out->next_position = Get64(control, 7);
  out->acked_end = Get64(control, 9);
  std::copy_n(control.body.begin() + kAckedWord, out->acked_after_lowest.size(),
              out->acked_after_lowest.begin());
  out->answers = Get64(control, kAnswersWord);
  return true;
}

std::optional<bool> JoinBody::HasResult(uint64_t position) const {
  if (position < lowest_unacked) return true;
  if (position == lowest_unacked || position >= acked_end) return false;
  const uint64_t i = position - lowest_unacked - 1;
  if (i >= kJoinAckedBits) return std::nullopt;
  return ((acked_after_lowest[i / 32] >> (i % 32)) & 1u) != 0;
}

}  // namespace atp::protocol
