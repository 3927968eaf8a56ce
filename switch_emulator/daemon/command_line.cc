#include "switch_emulator/daemon/command_line.h"

#include <cstdio>
#include <cstdlib>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace atp::switchd {
namespace {

std::string g_flags_file;

bool OwnFlags(absl::string_view path) { return absl::StrContains(path, g_flags_file); }

[[noreturn]] void BadUsage(const std::string& why) {
  std::fprintf(stderr, "atp-switchd: %s (see --help)\n", why.c_str());
  std::exit(kBadUsageExit);
}

// IsAbseilBuiltin: the flags Abseil's parser handles itself (usage, flag files).
bool IsAbseilBuiltin(absl::string_view name) {
  for (absl::string_view builtin : {"help", "helpfull", "helpshort", "helppackage", "helpon",
                                    "helpmatch", "version", "only_check_args", "flagfile",
                                    "fromenv", "tryfromenv", "undefok"}) {
    if (name == builtin) return true;
  }
  return false;
}

// CheckArguments: what Abseil's parser would refuse (with exit 1), refused
// here first with kBadUsageExit. Values are parsed into the flags; the real
// parse below sets them again.
void CheckArguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      if (i + 1 < argc) BadUsage(std::string("unexpected argument '") + argv[i + 1] + "'");
      return;
    }
    if (arg.size() < 2 || arg[0] != '-') BadUsage(std::string("unexpected argument '") + argv[i] + "'");
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    absl::string_view name = arg;
    absl::string_view value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (IsAbseilBuiltin(name)) continue;  // Abseil's own parser handles these
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && (!flag->IsOfType<bool>() || has_value)) flag = nullptr;
      if (flag != nullptr) continue;  // --nofoo
    }
    if (flag == nullptr) BadUsage(std::string("unknown flag --") + std::string(name));
    if (!has_value) {
      if (flag->IsOfType<bool>()) continue;
      if (i + 1 >= argc) BadUsage(std::string("--") + std::string(name) + " needs a value");
      value = argv[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      BadUsage(std::string("--") + std::string(name) + ": " + error);
    }
  }
}

}  // namespace

void ParseFlagsOrExit(int argc, char** argv, const std::string& flags_file,
                      const std::string& usage) {
  g_flags_file = flags_file;
  absl::FlagsUsageConfig config;
  config.contains_help_flags = OwnFlags;
  config.contains_helpshort_flags = OwnFlags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  CheckArguments(argc, argv);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) BadUsage(std::string("unexpected argument '") + rest[1] + "'");
}

}  // namespace atp::switchd
