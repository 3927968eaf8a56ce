// OpLedger's run digest (Outcome::run, carried by every operation
// confirmation: docs/protocol.md "Whose confirmation it is"): the same
// incarnations give the same digest at any PS (a restarted one's ledger
// included), another run's give another, and a resend of a confirmed piece
// is confirmed again with it.
#include "lib/ps/op_ledger.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace atp::ps {
namespace {

protocol::OpBeginBody Piece(uint64_t piece) {
  return protocol::OpBeginBody{.piece = piece, .first_position = piece * 3, .positions = 3,
                               .op_values = 186};
}

// Confirm: both workers of a two-worker queue declare `piece` as `a` and
// `b`; the confirmation's run digest.
uint64_t Confirm(OpLedger& ledger, uint64_t piece, uint64_t a, uint64_t b) {
  EXPECT_EQ(ledger.OnOpBegin(0, 0, a, Piece(piece)).verdict, OpLedger::Verdict::kPending);
  const OpLedger::Outcome outcome = ledger.OnOpBegin(0, 1, b, Piece(piece));
  EXPECT_EQ(outcome.verdict, OpLedger::Verdict::kConfirmed);
  return outcome.run;
}

TEST(OpLedgerTest, AConfirmationNamesTheRunThatDeclaredIt) {
  OpLedger ledger(/*workers=*/2, /*served_queues=*/1);
  const uint64_t run0 = Confirm(ledger, 0, 100, 101);
  EXPECT_NE(run0, 0u);
  EXPECT_EQ(Confirm(ledger, 1, 100, 101), run0);
  // A resend of a confirmed piece: confirmed again, the same run.
  const OpLedger::Outcome again = ledger.OnOpBegin(0, 0, 100, Piece(0));
  EXPECT_EQ(again.verdict, OpLedger::Verdict::kConfirmed);
  EXPECT_EQ(again.run, run0);

  // A new run (the PS starts the ledger over at its decision): another
  // digest, also when only one worker changed, or the two swapped places.
  ledger.Reset(0);
  const uint64_t run1 = Confirm(ledger, 0, 200, 201);
  EXPECT_NE(run1, run0);
  OpLedger mixed(/*workers=*/2, /*served_queues=*/1);
  EXPECT_NE(Confirm(mixed, 0, 200, 101), run1);
  OpLedger swapped(/*workers=*/2, /*served_queues=*/1);
  EXPECT_NE(Confirm(swapped, 0, 201, 200), run1);

  // A restarted PS's ledger: the same run, the same digest.
  OpLedger restarted(/*workers=*/2, /*served_queues=*/1);
  EXPECT_EQ(Confirm(restarted, 7, 100, 101), run0);
}

}  // namespace
}  // namespace atp::ps
