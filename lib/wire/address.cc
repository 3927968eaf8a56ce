// lib/wire/address.cc: MacAddress and Ipv4Address parsing and printing.
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/wire.h"

namespace atp::wire {
namespace {

// HexDigit: 0..15, or -1 if `c` is not a hexadecimal digit.
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::Status BadAddress(std::string_view kind, std::string_view text, std::string_view why) {
  std::string message(kind);
  message += " \"";
  message += text;
  message += "\": ";
  message += why;
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::StatusOr<MacAddress> MacAddress::Parse(std::string_view text) {
  // Exactly six hex pairs, five ':' separators: 17 characters.
  constexpr size_t kTextLength = 6 * 2 + 5;
  if (text.size() != kTextLength) {
    return BadAddress("MAC address", text, "expected six hex pairs like 02:00:00:00:00:10");
  }
  MacAddress mac;
  for (size_t i = 0; i < mac.bytes.size(); ++i) {
    const size_t at = i * 3;
    if (i > 0 && text[at - 1] != ':') {
      return BadAddress("MAC address", text, "pairs must be separated by ':'");
    }
    const int hi = HexDigit(text[at]);
    const int lo = HexDigit(text[at + 1]);
    if (hi < 0 || lo < 0) return BadAddress("MAC address", text, "not a hex digit");
    mac.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return mac;
}

std::string MacAddress::ToString() const {
  constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(17);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) text += ':';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xF];
  }
  return text;
}

absl::StatusOr<Ipv4Address> Ipv4Address::Parse(std::string_view text) {
  uint32_t value = 0;
  size_t at = 0;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (at >= text.size() || text[at] != '.') {
        return BadAddress("IPv4 address", text, "expected a dotted quad like 192.0.2.1");
      }
      ++at;
    }
    const size_t start = at;
    uint32_t number = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9' && at - start < 3) {
      number = number * 10 + static_cast<uint32_t>(text[at] - '0');
      ++at;
    }
    const size_t digits = at - start;
    if (digits == 0) return BadAddress("IPv4 address", text, "expected a dotted quad like 192.0.2.1");
    // Leading zeros are rejected: some parsers read them as octal.
    if (digits > 1 && text[start] == '0') return BadAddress("IPv4 address", text, "leading zero");
    if (number > 255) return BadAddress("IPv4 address", text, "octet above 255");
    value = value << 8 | number;
  }
  if (at != text.size()) {
    return BadAddress("IPv4 address", text, "expected a dotted quad like 192.0.2.1");
  }
  return Ipv4Address{value};
}

std::string Ipv4Address::ToString() const {
  std::string text;
  text.reserve(15);
  for (int shift = 24; shift >= 0; shift -= 8) {
    text += std::to_string((value >> shift) & 0xFF);
    if (shift > 0) text += '.';
  }
  return text;
}

}  // namespace atp::wire
