// tests/unit/runtime/join_frame.h: the control messages of a worker of a
// one-rack job, for tests that feed a PS by hand. JoinFrame is the kJoin a
// Worker sends on a queue at its first step (WorkerIoLoop::SendJoin): a PS
// asks for joins on a queue until every worker of the job has joined it
// (docs/protocol.md "Runs and restarts"), so such tests join first, as
// real workers do, and the PS then sends parameter packets only.
#ifndef ATP_TESTS_UNIT_RUNTIME_JOIN_FRAME_H_
#define ATP_TESTS_UNIT_RUNTIME_JOIN_FRAME_H_

#include <array>
#include <cstdint>
#include <vector>

#include "atp/transport.h"
#include "atp/wire.h"
#include "lib/protocol/join_message.h"
#include "lib/wire/control_message.h"

namespace atp::testing {

// WorkerControl: `control` from worker `worker` of job `job` (one rack of
// `workers`) on `queue` at `position`, with the incarnation 100 + worker of
// run 0, 100 x (run + 1) + worker of `run`.
inline wire::AtpMessage WorkerControl(uint8_t job, int worker, int workers, uint32_t queue,
                                      uint32_t position, wire::ControlMessage control,
                                      int run = 0) {
  control.sender = static_cast<uint32_t>(worker);
  control.incarnation = 100 * (static_cast<uint64_t>(run) + 1) + static_cast<uint64_t>(worker);
  const wire::ControlSender sender{.worker_in_rack = static_cast<uint32_t>(worker),
                                   .fan_in0 = static_cast<uint8_t>(workers)};
  return wire::MakeWorkerControl(job, sender, queue, position, control);
}

// JoinAt: the join of a worker of a one-rack job of `workers`, with `slots`
// and one I/O thread, whose stream stands at `lowest` (unacknowledged) and
// `next` (new) with no result after `lowest`.
inline protocol::JoinBody JoinAt(int workers, uint32_t slots, uint64_t lowest, uint64_t next) {
  protocol::JoinBody join;
  join.io_threads = 1;
  join.slots = slots;
  join.scale = 1.0;
  const std::vector<uint8_t> racks = {static_cast<uint8_t>(workers)};
  join.layout_fingerprint = protocol::LayoutFingerprint(racks);
  join.lowest_unacked = lowest;
  join.next_position = next;
  join.acked_end = lowest;
  return join;
}

// JoinMessage: worker `worker`'s kJoin `join` on `queue` of job `job`, from
// run `run` (WorkerControl).
inline wire::AtpMessage JoinMessage(uint8_t job, int worker, int workers, uint32_t queue,
                                    const protocol::JoinBody& join, int run = 0) {
  wire::ControlMessage control;
  protocol::EncodeJoin(join, control);
  return WorkerControl(job, worker, workers, queue, 0, control, run);
}

// JoinFrame: worker `worker` of job `job` (one rack of `workers`), at
// position 0 of `queue` with `slots`, from `from` to `to`.
inline std::array<uint8_t, wire::kFrameBytes> JoinFrame(uint8_t job, int worker, int workers,
                                                        uint32_t queue, uint32_t slots,
                                                        const transport::DeviceAddress& from,
                                                        const transport::DeviceAddress& to) {
  const wire::AtpMessage message =
      JoinMessage(job, worker, workers, queue, JoinAt(workers, slots, 0, 0));
  wire::FrameFields f;
  f.src_ip = from.ipv4;
  f.src_mac = from.mac;
  f.dst_ip = to.ipv4;
  f.dst_mac = to.mac;
  f.header = message.header;
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::EncodeFrame(f, message.payload, wire::kDefaultBasePort, frame);
  return frame;
}

}  // namespace atp::testing

#endif  // ATP_TESTS_UNIT_RUNTIME_JOIN_FRAME_H_
