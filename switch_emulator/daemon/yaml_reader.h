// switch_emulator/daemon/yaml_reader.h: typed reads of yaml-cpp nodes whose
// errors carry the file and the node's line ("<path>:<line>: <field>: <why>").
//
//   YamlContext ctx{"tor0.yaml"};
//   ATP_ASSIGN_OR_RETURN(YAML::Node root, LoadOneDocument(ctx, text));  // one document only
//   ATP_ASSIGN_OR_RETURN(MapReader top, MapReader::Create(ctx, {root, 1}, "the file"));
//   if (std::optional<YamlField> n = top.Take("aggregators")) {
//     ATP_ASSIGN_OR_RETURN(uint64_t v, ctx.Uint(*n, "aggregators", 1, 1 << 24));
//   }
//   ATP_RETURN_IF_ERROR(top.Finish());          // refuses keys nobody took
//
// yaml-cpp marks lines from 0; these helpers print them from 1.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_YAML_READER_H_
#define ATP_SWITCH_EMULATOR_DAEMON_YAML_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/wire.h"
#include "yaml-cpp/yaml.h"

namespace atp::switchd::internal {

// YamlField: a value and the 1-based line to blame for it (a key with no
// value is blamed on the key's line, not on the next one where yaml-cpp
// marks the null).
struct YamlField {
  YAML::Node node;
  int line = 1;

  // Item: a list element of this field.
  YamlField Item(const YAML::Node& item) const;
};

// YamlContext: the file being read; makes the errors.
struct YamlContext {
  std::string path;

  // LineOf: the 1-based line of `node`, or `fallback` when it has none.
  static int LineOf(const YAML::Node& node, int fallback);
  // Error: InvalidArgument "<path>:<line>: <reason>".
  absl::Status Error(int line, absl::string_view reason) const;
  absl::Status ErrorAt(const YamlField& field, absl::string_view reason) const {
    return Error(field.line, reason);
  }

  // Scalar reads; `field` names the value in the message.
  absl::StatusOr<std::string> String(const YamlField& node, absl::string_view field) const;
  absl::StatusOr<uint64_t> Uint(const YamlField& node, absl::string_view field, uint64_t min,
                                uint64_t max) const;
  absl::StatusOr<bool> Bool(const YamlField& node, absl::string_view field) const;
  absl::StatusOr<wire::Ipv4Address> Ipv4(const YamlField& node, absl::string_view field) const;
  // OneOf: the index in `choices` of the node's value.
  absl::StatusOr<size_t> OneOf(const YamlField& node, absl::string_view field,
                               const std::vector<absl::string_view>& choices) const;
  // Sequence: the node must be a sequence (a YAML list).
  absl::Status Sequence(const YamlField& node, absl::string_view field) const;
};

// LoadOneDocument: the one YAML document of a configuration file, or
// InvalidArgument "<path>:<line>: <why>": a syntax error ("YAML: <what>",
// yaml-cpp's words) or a second document that holds anything (its line).
// An empty document after the first (a trailing '---') passes when it is
// the last; a '...' that ends the first starts none. An empty text gives a
// null node, which the caller refuses.
absl::StatusOr<YAML::Node> LoadOneDocument(const YamlContext& ctx, const std::string& text);

// MapReader: one YAML mapping whose keys are taken one by one; Finish
// refuses the ones never taken. Duplicate keys are refused at Create.
class MapReader {
 public:
  static absl::StatusOr<MapReader> Create(const YamlContext& ctx, const YamlField& node,
                                          absl::string_view field);

  // Take: the value of `key`, or nullopt when absent.
  std::optional<YamlField> Take(absl::string_view key);
  // Require: the value of `key`, or an error at the mapping's line.
  absl::StatusOr<YamlField> Require(absl::string_view key);
  // Finish: an error at the first key nobody took.
  absl::Status Finish() const;
  int line() const { return line_; }

 private:
  struct Entry {
    std::string key;
    int key_line = 1;
    YamlField value;
    bool taken = false;
  };
  MapReader(const YamlContext& ctx, std::string field, int line)
      : ctx_(&ctx), field_(std::move(field)), line_(line) {}

  const YamlContext* ctx_;
  std::string field_;
  int line_;
  std::vector<Entry> entries_;
};

}  // namespace atp::switchd::internal

#endif  // ATP_SWITCH_EMULATOR_DAEMON_YAML_READER_H_
