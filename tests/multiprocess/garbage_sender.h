// tests/multiprocess/garbage_sender.h: what garbage_sender's two halves
// share: the malformed frames, the send-then-hold loop (garbage_sender.cc) and
// the DPDK ports (garbage_sender_dpdk.cc, built only with DPDK: a build
// without it sends over --port=udp only).
#ifndef ATP_TESTS_MULTIPROCESS_GARBAGE_SENDER_H_
#define ATP_TESTS_MULTIPROCESS_GARBAGE_SENDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "atp/wire.h"

namespace atp::tests {

// Garbage: one malformed frame and the DecodeError a switch must find in it
// (or, with --forged, a well-formed forged frame, kOk, and its `name`).
struct Garbage {
  std::vector<uint8_t> bytes;
  wire::DecodeError reason;
  std::string name;  // the result line's key; empty: DecodeErrorName(reason)
};

// SendAndHold: `count` rounds of every kind through `send` (true when the
// frame left), the result line, then `drain` every 5 ms until --hold_s has
// passed or a signal came. The exit status: 0 iff every frame left.
int SendAndHold(const std::vector<Garbage>& kinds, int count,
                const std::function<bool(const Garbage&)>& send,
                const std::function<void()>& drain);

// DpdkPort: the flags of --port=memif or --port=af_packet.
struct DpdkPort {
  std::string kind;  // "memif" or "af_packet"
  std::string memif_socket;
  bool memif_server = false;
  uint32_t memif_id = 0;
  std::string iface;
  std::string netns;
  int link_timeout_s = 10;
};

// SendThroughDpdk: opens the port (its own EAL), waits for its link and sends
// as SendAndHold does. Exit status as main's.
int SendThroughDpdk(const DpdkPort& port, const std::vector<Garbage>& kinds, int count);

}  // namespace atp::tests

#endif  // ATP_TESTS_MULTIPROCESS_GARBAGE_SENDER_H_
