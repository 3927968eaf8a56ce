#include "lib/ps/op_ledger.h"

#include "lib/ps/incarnation_mix.h"

namespace atp::ps {

uint64_t OpLedger::RunDigest(const std::vector<uint64_t>& incarnations) {
  // Chained, so that the order (which worker is which incarnation) counts.
  uint64_t digest = 0x9e3779b97f4a7c15u;
  for (const uint64_t incarnation : incarnations) {
    digest = MixIncarnation(digest ^ MixIncarnation(incarnation));
  }
  return digest == 0 ? 1 : digest;
}

OpLedger::OpLedger(int workers, uint32_t served_queues)
    : workers_(workers), queues_(served_queues) {
  for (QueueLedger& q : queues_) q.incarnations.assign(static_cast<size_t>(workers), 0);
}

void OpLedger::Reset(uint32_t queue_index) {
  if (queue_index < queues_.size()) {
    queues_[queue_index] = QueueLedger{};
    queues_[queue_index].incarnations.assign(static_cast<size_t>(workers_), 0);
  }
}

OpLedger::Outcome OpLedger::OnOpBegin(uint32_t queue_index, int worker, uint64_t incarnation,
                                      const protocol::OpBeginBody& body) {
  Outcome outcome;
  if (queue_index >= queues_.size() || worker < 0 || worker >= workers_) return outcome;
  if (queues_[queue_index].incarnations[static_cast<size_t>(worker)] != incarnation) {
    const bool first = queues_[queue_index].incarnations[static_cast<size_t>(worker)] == 0;
    std::vector<uint64_t> incarnations = queues_[queue_index].incarnations;
    if (!first) Reset(queue_index);
    queues_[queue_index].incarnations = std::move(incarnations);
    queues_[queue_index].incarnations[static_cast<size_t>(worker)] = incarnation;
    queues_[queue_index].run = 0;
  }
  QueueLedger& q = queues_[queue_index];
  if (body.piece < q.forgotten_below) {
    outcome.verdict = Verdict::kTooOld;
    return outcome;
  }
  auto [it, inserted] = q.pieces.try_emplace(body.piece);
  Entry& entry = it->second;
  if (inserted) {
    entry.body = body;
    entry.first_worker = worker;
    entry.seen.assign(static_cast<size_t>(workers_), false);
  }
  outcome.expected = entry.body;
  outcome.first_worker = entry.first_worker;
  if (!(body == entry.body)) {
    outcome.verdict = Verdict::kMismatch;
    return outcome;
  }
  if (!entry.seen[static_cast<size_t>(worker)]) {
    entry.seen[static_cast<size_t>(worker)] = true;
    ++entry.count;
  }
  if (entry.count < workers_) return outcome;
  outcome.verdict = Verdict::kConfirmed;
  // Every worker declared it, each as its incarnation now (a new one starts
  // the ledger over, above): the run that confirmed it.
  if (q.run == 0) q.run = RunDigest(q.incarnations);
  outcome.run = q.run;
  // Forget confirmed pieces far behind this one.
  while (!q.pieces.empty() && q.pieces.begin()->first + kKeptConfirmed < body.piece &&
         q.pieces.begin()->second.count == workers_) {
    q.forgotten_below = q.pieces.begin()->first + 1;
    q.pieces.erase(q.pieces.begin());
  }
  return outcome;
}

}  // namespace atp::ps
