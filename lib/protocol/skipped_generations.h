// lib/protocol/skipped_generations.h: the bound that keeps SkipReduce's
// contribution variant live (docs/skipreduce.md, "A non-contributor is never
// far behind"), shared by the workers that keep it and the PS that relies on
// it.
//
// Under SkipVariant::kContributions the job does not wait for a worker at the
// positions it leaves out, so the others may complete several generations of
// a window slot (positions p, p + slots, p + 2 slots, ...) before that worker
// reaches p, and it must then get p's result from the PS. Every worker
// therefore sends a keep-alive contribution of zeros at the next generation
// of a slot after leaving out kMaxSkippedGenerations consecutive ones: the PS
// cannot complete that generation without it, and the worker sends it only
// after it acknowledged the previous one (the window rule). So while a worker
// still needs position p, the PS has completed at most
// kMaxSkippedGenerations + 1 generations of p's slot from p on (a contributor
// to p that lost p's result may then leave out the next
// kMaxSkippedGenerations), and keeping that many completed packets per slot
// (PsConfig::contribution_history) answers every pull and resend.
#ifndef ATP_LIB_PROTOCOL_SKIPPED_GENERATIONS_H_
#define ATP_LIB_PROTOCOL_SKIPPED_GENERATIONS_H_

#include <cstdint>

namespace atp::protocol {

inline constexpr uint32_t kMaxSkippedGenerations = 4;
// kContributionHistoryNeeded: the completed generations per slot the PS keeps
// for a job with contribution skipping, at the least.
inline constexpr uint32_t kContributionHistoryNeeded = kMaxSkippedGenerations + 1;

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_SKIPPED_GENERATIONS_H_
