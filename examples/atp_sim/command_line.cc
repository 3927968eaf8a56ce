#include "examples/atp_sim/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "examples/atp_sim/scenarios.h"

namespace atp::sim_tool {
namespace {

constexpr char kUsage[] =
    "atp-sim: simulates ATP in-network aggregation (workers, PS and ATP switches running the\n"
    "real libatp engines on a deterministic discrete-event network) and checks that every\n"
    "result is exact.\n"
    "\n"
    "usage: atp-sim [--flag=value ...]\n"
    "       atp-sim --scenario=NAME [--scale=full|small] [--seed=S] [--json]\n"
    "  e.g. atp-sim --workers=4 --racks=2 --loss=0.001 --tensor_mb=4 --iterations=3\n"
    "       atp-sim --scenario=loss-sweep --scale=small\n"
    "\n"
    "Flags may also be written with dashes (--tensor-mb) and as '--flag value'.\n"
    "Exit status: 0 every result exact; 1 a result was wrong or a job did not finish;\n"
    "2 bad command line.\n";

// Ours: the flags defined in this tool (not Abseil's own).
bool Ours(const absl::CommandLineFlag& flag) {
  return flag.Filename().find("atp_sim") != std::string::npos;
}

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "atp-sim: %s (see atp-sim --help)\n", message.c_str());
  std::exit(kExitUsage);
}

[[noreturn]] void PrintHelpAndExit() {
  std::printf("%s\nscenarios (--scenario=NAME):\n", kUsage);
  for (const ScenarioInfo& info : Scenarios()) {
    std::printf("  %-20s %s\n", std::string(info.name).c_str(), std::string(info.summary).c_str());
  }
  std::printf("\nflags:\n");
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (Ours(*flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  for (const absl::CommandLineFlag* flag : flags) {
    std::printf("  --%s (default: %s)\n      %s\n", std::string(flag->Name()).c_str(),
                flag->DefaultValue().c_str(), flag->Help().c_str());
  }
  std::exit(0);
}

}  // namespace

void ParseCommandLineOrExit(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // Normalize "--tensor-mb" to "--tensor_mb", check every flag name and value
  // ourselves, then let Abseil parse what is known to be good.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "-h" || arg == "--help" || arg == "-help" || arg == "--helpfull") PrintHelpAndExit();
    if (arg.size() < 2 || arg[0] != '-') UsageError("unexpected argument '" + arg + "'");
    if (arg == "--") UsageError("unexpected '--'");
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    std::string name = arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    std::replace(name.begin(), name.end(), '-', '_');
    arg = "--" + name + (eq == std::string::npos ? "" : arg.substr(eq));

    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if ((flag == nullptr || !Ours(*flag)) && name.rfind("no", 0) == 0) {
      absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
      if (positive != nullptr && Ours(*positive) && positive->IsOfType<bool>()) {
        flag = positive;
        negated = true;
      }
    }
    if (flag == nullptr || !Ours(*flag)) UsageError("unknown flag --" + name);
    if (negated) {
      if (eq != std::string::npos) UsageError("--" + name + " takes no value");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
    } else if (flag->IsOfType<bool>()) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
      arg += "=" + value;
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    } else {
      UsageError("--" + name + " needs a value");
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      UsageError("--" + name + "=" + value + ": " + error);
    }
  }
  std::vector<char*> normalized;
  for (std::string& arg : args) normalized.push_back(arg.data());
  normalized.push_back(nullptr);
  absl::ParseCommandLine(static_cast<int>(args.size()), normalized.data());
}

}  // namespace atp::sim_tool
