// lib/wire/frame_checks.h: the frame checks one at a time, in the order
// ATP-SPEC section 2 and atp/wire.h define (the first failure is reported).
// Private to lib/wire, and visible to tests and the fuzzer, which prove that
// the branch-light ValidateFrame agrees with it on every input.
#ifndef ATP_LIB_WIRE_FRAME_CHECKS_H_
#define ATP_LIB_WIRE_FRAME_CHECKS_H_

#include <cstdint>
#include <span>

#include "atp/wire.h"

namespace atp::wire::internal {

// ValidateFrameInOrder: what ValidateFrame returns, computed check by check:
// length, EtherType, IPv4 version/IHL and fragmentation, total length,
// checksum, protocol, UDP length, ports, TOS, then ValidateHeader.
DecodeError ValidateFrameInOrder(std::span<const uint8_t> frame, uint16_t base_port);

// Ipv4ChecksumVerifies: the RFC 1071 sum over the 20 header bytes, checksum
// field included, is 0xFFFF.
bool Ipv4ChecksumVerifies(const uint8_t* ipv4_header);

}  // namespace atp::wire::internal

#endif  // ATP_LIB_WIRE_FRAME_CHECKS_H_
