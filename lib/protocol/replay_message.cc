#include "lib/protocol/replay_message.h"

#include <algorithm>

namespace atp::protocol {
namespace {

constexpr size_t kPartWord = 0;
constexpr size_t kPositionWord = 1;
constexpr size_t kHeaderWord = 3;
constexpr size_t kHeaderWords = wire::kAtpHeaderBytes / 4;  // 4
constexpr size_t kFirstValueWord = kHeaderWord + kHeaderWords;  // 7
static_assert(kFirstValueWord + kReplayWordsPerPart <= wire::kControlBodyWords);

uint32_t LoadBigEndian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void StoreBigEndian(uint32_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace

std::array<ReplayPart, kReplayParts> SplitReplay(
    uint64_t position, const wire::AtpHeader& header,
    std::span<const uint8_t, wire::kPayloadBytes> wire_payload) {
  std::array<ReplayPart, kReplayParts> parts;
  for (uint32_t p = 0; p < kReplayParts; ++p) {
    parts[p].part = p;
    parts[p].position = position;
    parts[p].header = header;
    for (size_t i = 0; i < kReplayWordsPerPart; ++i) {
      parts[p].words[i] = LoadBigEndian(&wire_payload[(p * kReplayWordsPerPart + i) * 4]);
    }
  }
  return parts;
}

void EncodeReplay(const ReplayPart& part, wire::ControlMessage& control) {
  control.type = wire::ControlType::kReplay;
  control.body.fill(0);
  control.body[kPartWord] = part.part;
  control.body[kPositionWord] = static_cast<uint32_t>(part.position >> 32);
  control.body[kPositionWord + 1] = static_cast<uint32_t>(part.position);
  std::array<uint8_t, wire::kAtpHeaderBytes> header{};
  wire::EncodeHeader(part.header, header);
  for (size_t i = 0; i < kHeaderWords; ++i) {
    control.body[kHeaderWord + i] = LoadBigEndian(&header[i * 4]);
  }
  std::copy(part.words.begin(), part.words.end(), control.body.begin() + kFirstValueWord);
}

bool DecodeReplay(const wire::ControlMessage& control, ReplayPart* out) {
  if (control.type != wire::ControlType::kReplay || control.body[kPartWord] >= kReplayParts) {
    return false;
  }
  out->part = control.body[kPartWord];
  out->position =
      (uint64_t{control.body[kPositionWord]} << 32) | control.body[kPositionWord + 1];
  std::array<uint8_t, wire::kAtpHeaderBytes> header{};
  for (size_t i = 0; i < kHeaderWords; ++i) {
    StoreBigEndian(control.body[kHeaderWord + i], &header[i * 4]);
  }
  out->header = wire::DecodeHeader(header);
  std::copy_n(control.body.begin() + kFirstValueWord, kReplayWordsPerPart, out->words.begin());
  return true;
}

std::optional<wire::AtpMessage> ReplayAssembler::Add(const ReplayPart& part) {
  auto same_fragment = [&](const Entry& e) {
    return e.position == part.position && e.header.job == part.header.job &&
           e.header.queue() == part.header.queue();
  };
  auto it = std::find_if(entries_.begin(), entries_.end(), same_fragment);
  if (it != entries_.end() && !(it->header == part.header)) {
    entries_.erase(it);  // the halves disagree: start over with this one
    it = entries_.end();
  }
  if (it == entries_.end()) {
    if (capacity_ == 0) return std::nullopt;
    if (entries_.size() == capacity_) entries_.erase(entries_.begin());
    entries_.push_back(Entry{part.position, part.header, 0, {}});
    it = entries_.end() - 1;
  }
  std::copy(part.words.begin(), part.words.end(),
            it->payload.begin() + static_cast<std::ptrdiff_t>(part.part * kReplayWordsPerPart));
  it->parts |= 1u << part.part;
  if (it->parts != (1u << kReplayParts) - 1) return std::nullopt;
  wire::AtpMessage packet{it->header, it->payload};
  entries_.erase(it);
  return packet;
}

}  // namespace atp::protocol
