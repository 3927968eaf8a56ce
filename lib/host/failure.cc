// lib/host/failure.cc: atp/failure.h. The Failure travels as an absl::Status
// payload under kFailureTypeUrl, as text: "kind=2;queue=0;workers=1,3;detail=".
#include "atp/failure.h"

#include <charconv>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace atp {
namespace {

constexpr char kFailureTypeUrl[] = "type.libatp.dev/atp.Failure";

bool ParseInt(absl::string_view text, int* out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string_view FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kPsUnreachable:
      return "ps_unreachable";
    case FailureKind::kWaitingForWorkers:
      return "waiting_for_workers";
    case FailureKind::kStalled:
      return "stalled";
    case FailureKind::kPsRestarted:
      return "ps_restarted";
    case FailureKind::kMismatch:
      return "mismatch";
  }
  return "unknown";
}

absl::Status WithFailure(absl::Status status, const Failure& failure) {
  status.SetPayload(kFailureTypeUrl,
                    absl::Cord(absl::StrCat("kind=", static_cast<int>(failure.kind),
                                            ";queue=", failure.queue,
                                            ";workers=", absl::StrJoin(failure.workers, ","),
                                            ";detail=", failure.detail)));
  return status;
}

std::optional<Failure> FailureOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kFailureTypeUrl);  // absl::optional in Abseil 20220623
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  Failure failure;
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    int value = 0;
    if (kv.first == "kind") {
      if (!ParseInt(kv.second, &value) || value < 1 ||
          value > static_cast<int>(FailureKind::kMismatch)) {
        return std::nullopt;
      }
      failure.kind = static_cast<FailureKind>(value);
    } else if (kv.first == "queue") {
      if (!ParseInt(kv.second, &value) || value < 0) return std::nullopt;
      failure.queue = static_cast<uint32_t>(value);
    } else if (kv.first == "detail") {
      failure.detail = std::string(kv.second);
    } else if (kv.first == "workers") {
      for (absl::string_view w : absl::StrSplit(kv.second, ',', absl::SkipEmpty())) {
        if (!ParseInt(w, &value)) return std::nullopt;
        failure.workers.push_back(value);
      }
    }
  }
  return failure;
}

}  // namespace atp
