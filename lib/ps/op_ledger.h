// lib/ps/op_ledger.h: the PS's record of the pieces of operations each
// worker declared on a queue (kOpBegin, lib/protocol/op_begin_message.h):
// a piece is confirmed once every worker of the job declared it, all alike;
// the first declaration that differs is a mismatch.
//
//   OpLedger ledger(/*workers=*/4, /*served_queues=*/16);
//   switch (ledger.OnOpBegin(q, worker, body).verdict) { ... }
//
// Memory: one entry per piece not yet confirmed by everyone, plus the last
// kKeptConfirmed confirmed ones per queue (so that a worker whose
// confirmation was lost gets it again).
#ifndef ATP_LIB_PS_OP_LEDGER_H_
#define ATP_LIB_PS_OP_LEDGER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "lib/protocol/op_begin_message.h"

namespace atp::ps {

class OpLedger {
 public:
  static constexpr uint64_t kKeptConfirmed = 1024;

  enum class Verdict : uint8_t {
    kPending,    // not every worker declared it yet
    kConfirmed,  // every worker declared it alike (now, or before)
    kMismatch,   // this declaration differs from `expected`, worker `first_worker`'s
    kTooOld,     // confirmed and forgotten long ago: ignore
  };
  struct Outcome {
    Verdict verdict = Verdict::kPending;
    protocol::OpBeginBody expected;
    int first_worker = 0;
    // run (kConfirmed): a digest of the incarnations every worker declared
    // the piece as, in worker order (never 0). The confirmation carries it
    // (protocol::StatusBody::run), so that a worker can tell its own run's
    // confirmations from another run's of the same piece number: a
    // confirmation is multicast to whichever processes the job's addresses
    // reach, and a late one of the run before was taken by a new run's
    // worker as its own (docs/protocol.md "Mismatches are errors").
    uint64_t run = 0;
  };

  OpLedger(int workers, uint32_t served_queues);

  // OnOpBegin: worker `worker` (of incarnation `incarnation`) declared `body`.
  // A worker of a new incarnation starts the queue's ledger over (a new run,
  // or a worker that restarted: every other worker re-declares what is not
  // confirmed yet).
  Outcome OnOpBegin(uint32_t queue_index, int worker, uint64_t incarnation,
                    const protocol::OpBeginBody& body);
  // Reset: forgets a queue's pieces (a new run starts at piece 0).
  void Reset(uint32_t queue_index);

 private:
  struct Entry {
    protocol::OpBeginBody body;
    int first_worker = 0;
    std::vector<bool> seen;
    int count = 0;
  };
  struct QueueLedger {
    std::map<uint64_t, Entry> pieces;
    uint64_t forgotten_below = 0;  // pieces below this were confirmed and dropped
    std::vector<uint64_t> incarnations;  // per worker: of its last declaration (0: none)
    uint64_t run = 0;  // RunDigest(incarnations) once computed; 0: not yet
  };
  // RunDigest: the digest of `incarnations` (Outcome::run), never 0.
  static uint64_t RunDigest(const std::vector<uint64_t>& incarnations);
  const int workers_;
  std::vector<QueueLedger> queues_;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_OP_LEDGER_H_
