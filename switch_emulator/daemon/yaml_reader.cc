#include "switch_emulator/daemon/yaml_reader.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/status_macros.h"
#include "yaml-cpp/eventhandler.h"

namespace atp::switchd::internal {
namespace {

absl::string_view KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Undefined: break;
  }
  return "nothing";
}

// DocumentProbe: what the one-document check needs of a YAML document's
// events: the line it starts on and whether it holds anything. An empty
// document ('---' and nothing after it) is a single null, like '~'.
class DocumentProbe : public YAML::EventHandler {
 public:
  int line() const { return line_; }
  bool holds_something() const { return holds_something_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    line_ = mark.line < 0 ? 1 : mark.line + 1;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { holds_something_ = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    holds_something_ = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    holds_something_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    holds_something_ = true;
  }
  void OnMapEnd() override {}

 private:
  int line_ = 1;
  bool holds_something_ = false;
};

absl::Status MoreThanOneDocument(const YamlContext& ctx, const DocumentProbe& extra) {
  return ctx.Error(extra.line(),
                   "the configuration holds more than one YAML document (another "
                   "starts on this line); a configuration is one document");
}

// CheckOneDocument: refuses a stream with more documents than the
// configuration's one (LoadOneDocument says which pass). It asks the parser
// for at most three documents (the configuration, an empty one, and whether
// that one was the last), never for every one: on a token no node can start
// with (',' outside brackets) yaml-cpp 0.7's Parser consumes nothing and
// hands out an empty document each time it is asked, so reading to the end
// of the stream (YAML::LoadAll) never returns (switchd_config_fuzzer's
// comma_alone seed).
absl::Status CheckOneDocument(const YamlContext& ctx, const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentProbe config;
  // Nothing to configure: YAML::Load's null node, which the caller refuses.
  if (!parser.HandleNextDocument(config) || !config.holds_something()) return absl::OkStatus();
  DocumentProbe second;
  if (!parser.HandleNextDocument(second)) return absl::OkStatus();
  if (second.holds_something()) return MoreThanOneDocument(ctx, second);
  DocumentProbe third;
  if (!parser.HandleNextDocument(third)) return absl::OkStatus();  // the empty one was last
  return MoreThanOneDocument(ctx, third);
}

}  // namespace

absl::StatusOr<YAML::Node> LoadOneDocument(const YamlContext& ctx, const std::string& text) {
  try {
    // Parsed twice, for the node and for the document check: yaml-cpp
    // builds nodes only in YAML::Load (its NodeBuilder is not installed),
    // and a configuration is a few KiB.
    YAML::Node root = YAML::Load(text);
    ATP_RETURN_IF_ERROR(CheckOneDocument(ctx, text));
    return root;
  } catch (const YAML::Exception& e) {
    return ctx.Error(e.mark.line < 0 ? 1 : e.mark.line + 1, absl::StrCat("YAML: ", e.msg));
  }
}

YamlField YamlField::Item(const YAML::Node& item) const {
  return YamlField{item, item.IsNull() ? line : YamlContext::LineOf(item, line)};
}

int YamlContext::LineOf(const YAML::Node& node, int fallback) {
  if (!node.IsDefined()) return fallback;
  const YAML::Mark mark = node.Mark();
  return mark.line < 0 ? fallback : mark.line + 1;
}

absl::Status YamlContext::Error(int line, absl::string_view reason) const {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", reason));
}

absl::StatusOr<std::string> YamlContext::String(const YamlField& f, absl::string_view field) const {
  if (!f.node.IsScalar()) {
    return ErrorAt(f, absl::StrCat(field, ": expected a string, got ", KindName(f.node)));
  }
  if (f.node.Scalar().empty()) return ErrorAt(f, absl::StrCat(field, ": must not be empty"));
  return f.node.Scalar();
}

absl::StatusOr<uint64_t> YamlContext::Uint(const YamlField& f, absl::string_view field,
                                           uint64_t min, uint64_t max) const {
  if (!f.node.IsScalar()) {
    return ErrorAt(f, absl::StrCat(field, ": expected an integer, got ", KindName(f.node)));
  }
  uint64_t value = 0;
  const std::string& text = f.node.Scalar();
  if (text.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(text[0])) ||
      !absl::SimpleAtoi(text, &value)) {
    return ErrorAt(f, absl::StrCat(field, ": expected a non-negative integer, got '", text, "'"));
  }
  if (value < min || value > max) {
    return ErrorAt(f, absl::StrCat(field, ": ", value, " is not in ", min, "..", max));
  }
  return value;
}

absl::StatusOr<bool> YamlContext::Bool(const YamlField& f, absl::string_view field) const {
  if (f.node.IsScalar()) {
    if (f.node.Scalar() == "true") return true;
    if (f.node.Scalar() == "false") return false;
  }
  return ErrorAt(f, absl::StrCat(field, ": expected true or false"));
}

absl::StatusOr<wire::Ipv4Address> YamlContext::Ipv4(const YamlField& f,
                                                    absl::string_view field) const {
  if (!f.node.IsScalar()) {
    return ErrorAt(f, absl::StrCat(field, ": expected an IPv4 address, got ", KindName(f.node)));
  }
  absl::StatusOr<wire::Ipv4Address> ip = wire::Ipv4Address::Parse(f.node.Scalar());
  if (!ip.ok()) {
    return ErrorAt(f, absl::StrCat(field, ": '", f.node.Scalar(),
                                   "' is not an IPv4 address (a.b.c.d)"));
  }
  return *ip;
}

absl::StatusOr<size_t> YamlContext::OneOf(const YamlField& f, absl::string_view field,
                                          const std::vector<absl::string_view>& choices) const {
  if (f.node.IsScalar()) {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (f.node.Scalar() == choices[i]) return i;
    }
  }
  return ErrorAt(f, absl::StrCat(field, ": expected one of ", absl::StrJoin(choices, ", "),
                                 f.node.IsScalar() ? absl::StrCat(", got '", f.node.Scalar(), "'")
                                                   : absl::StrCat(", got ", KindName(f.node))));
}

absl::Status YamlContext::Sequence(const YamlField& f, absl::string_view field) const {
  if (f.node.IsSequence()) return absl::OkStatus();
  return ErrorAt(f, absl::StrCat(field, ": expected a list, got ", KindName(f.node)));
}

absl::StatusOr<MapReader> MapReader::Create(const YamlContext& ctx, const YamlField& f,
                                            absl::string_view field) {
  if (!f.node.IsMap()) {
    return ctx.ErrorAt(f, absl::StrCat(field, ": expected a mapping (key: value), got ",
                                       KindName(f.node)));
  }
  MapReader reader(ctx, std::string(field), f.line);
  for (YAML::const_iterator it = f.node.begin(); it != f.node.end(); ++it) {
    const int key_line = YamlContext::LineOf(it->first, f.line);
    if (!it->first.IsScalar()) {
      return ctx.Error(key_line, absl::StrCat(field, ": keys must be plain names"));
    }
    const std::string& key = it->first.Scalar();
    for (const Entry& e : reader.entries_) {
      if (e.key == key) {
        return ctx.Error(key_line, absl::StrCat(field, ": duplicate key '", key,
                                                "' (first on line ", e.key_line, ")"));
      }
    }
    const int value_line = it->second.IsNull() ? key_line : YamlContext::LineOf(it->second, key_line);
    reader.entries_.push_back(Entry{key, key_line, YamlField{it->second, value_line}, false});
  }
  return reader;
}

std::optional<YamlField> MapReader::Take(absl::string_view key) {
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.taken = true;
      return e.value;
    }
  }
  return std::nullopt;
}

absl::StatusOr<YamlField> MapReader::Require(absl::string_view key) {
  std::optional<YamlField> f = Take(key);
  if (!f) return ctx_->Error(line_, absl::StrCat(field_, ": missing '", key, "'"));
  return *f;
}

absl::Status MapReader::Finish() const {
  for (const Entry& e : entries_) {
    if (!e.taken) return ctx_->Error(e.key_line, absl::StrCat(field_, ": unknown key '", e.key, "'"));
  }
  return absl::OkStatus();
}

}  // namespace atp::switchd::internal
