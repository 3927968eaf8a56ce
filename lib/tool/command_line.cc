// lib/tool/command_line.cc: ParseCommandLineOrExit. Every argument is checked
// here first (name known and the tool's own, value parses), because Abseil's
// parser would refuse a bad one with exit status 1; what passes is then
// handed, normalized, to absl::ParseCommandLine.
#include "lib/tool/command_line.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace atp::tool {
namespace {

// GivenFlags: the names of the flags on the command line (underscored,
// "--noflag" as "flag"), filled by ParseCommandLineOrExit.
std::set<std::string, std::less<>>& GivenFlags() {
  static std::set<std::string, std::less<>> given;
  return given;
}

class CommandLine {
 public:
  CommandLine(std::string_view program, const std::vector<std::string>& flag_sources,
              std::string_view usage)
      : program_(program), flag_sources_(flag_sources), usage_(usage) {}

  // Own: `flag` is defined in one of the tool's flag sources (not one of
  // Abseil's own flags, nor another tool's).
  bool Own(const absl::CommandLineFlag* flag) const {
    if (flag == nullptr) return false;
    const std::string file = flag->Filename();
    return std::any_of(flag_sources_.begin(), flag_sources_.end(),
                       [&](const std::string& source) { return absl::StrContains(file, source); });
  }

  [[noreturn]] void BadUsage(const std::string& why) const {
    std::fprintf(stderr, "%s: %s (see --help)\n", program_.c_str(), why.c_str());
    std::exit(kExitBadUsage);
  }

  [[noreturn]] void PrintHelpAndExit() const {
    std::fputs(usage_.c_str(), stdout);
    if (!usage_.empty() && usage_.back() != '\n') std::fputs("\n", stdout);
    std::printf("\nflags:\n");
    std::vector<absl::CommandLineFlag*> flags;
    for (const auto& [name, flag] : absl::GetAllFlags()) {
      if (Own(flag)) flags.push_back(flag);
    }
    std::sort(flags.begin(), flags.end(), [](auto* a, auto* b) { return a->Name() < b->Name(); });
    for (const absl::CommandLineFlag* flag : flags) {
      std::printf("  --%s (default: %s)\n      %s\n", std::string(flag->Name()).c_str(),
                  flag->DefaultValue().c_str(), flag->Help().c_str());
    }
    std::exit(0);
  }

  // Check: checks args[1..] and rewrites each flag as "--name[=value]"
  // (dashes in the name made underscores, a separate value joined with '=').
  // Values are parsed into the flags here; Abseil's parse sets them again.
  void Check(std::vector<std::string>& args) const {
    for (size_t i = 1; i < args.size(); ++i) {
      std::string& arg = args[i];
      if (arg == "--") {
        if (i + 1 < args.size()) BadUsage("unexpected argument '" + args[i + 1] + "'");
        return;
      }
      if (arg.size() < 2 || arg[0] != '-') BadUsage("unexpected argument '" + arg + "'");
      const size_t dashes = arg[1] == '-' ? 2 : 1;
      const size_t eq = arg.find('=');
      const bool has_value = eq != std::string::npos;
      const std::string typed = arg.substr(0, has_value ? eq : std::string::npos);
      std::string name = typed.substr(dashes);
      std::replace(name.begin(), name.end(), '-', '_');
      if (!has_value &&
          (name == "h" || name == "help" || name == "helpfull" || name == "helpshort")) {
        PrintHelpAndExit();
      }
      std::string value = has_value ? arg.substr(eq + 1) : std::string();
      arg = "--" + name + (has_value ? "=" + value : "");

      absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (!Own(flag) && absl::StartsWith(name, "no")) {
        absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
        if (Own(positive) && positive->IsOfType<bool>()) {
          if (has_value) BadUsage("--" + name + " takes no value");
          GivenFlags().insert(name.substr(2));
          continue;  // --noflag
        }
      }
      if (!Own(flag)) BadUsage("unknown flag " + typed);
      GivenFlags().insert(name);
      if (!has_value) {
        if (flag->IsOfType<bool>()) continue;
        if (i + 1 >= args.size()) BadUsage("--" + name + " needs a value");
        value = args[i + 1];
        arg += "=" + value;
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
      std::string error;
      if (!flag->ParseFrom(value, &error)) BadUsage("--" + name + "=" + value + ": " + error);
    }
  }

 private:
  std::string program_;
  const std::vector<std::string>& flag_sources_;
  std::string usage_;
};

}  // namespace

void ParseCommandLineOrExit(int argc, char** argv, std::string_view program,
                            const std::vector<std::string>& flag_sources, std::string_view usage) {
  const CommandLine command_line(program, flag_sources, usage);
  absl::SetProgramUsageMessage(absl::string_view(usage.data(), usage.size()));
  std::vector<std::string> args(argv, argv + argc);
  command_line.Check(args);
  std::vector<char*> normalized;
  for (std::string& arg : args) normalized.push_back(arg.data());
  normalized.push_back(nullptr);
  absl::ParseCommandLine(static_cast<int>(args.size()), normalized.data());
}

bool FlagGiven(std::string_view name) { return GivenFlags().count(name) > 0; }

}  // namespace atp::tool
