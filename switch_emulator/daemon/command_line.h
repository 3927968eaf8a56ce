// switch_emulator/daemon/command_line.h: atp-switchd's flag parsing, with the
// exit status the contract gives bad flags (2, where Abseil's parser uses 1).
#ifndef ATP_SWITCH_EMULATOR_DAEMON_COMMAND_LINE_H_
#define ATP_SWITCH_EMULATOR_DAEMON_COMMAND_LINE_H_

#include <string>

namespace atp::switchd {

// kBadUsageExit: the exit status for bad flags or a bad configuration.
inline constexpr int kBadUsageExit = 2;

// ParseFlagsOrExit: parses argv into the Abseil flags. An unknown flag, a
// value that does not parse, or a positional argument prints why on stderr
// and exits with kBadUsageExit; --help (and --helpfull) print the usage and
// exit 0. `usage` heads the --help text; only flags defined in files whose
// path contains `flags_file` are listed by --help.
void ParseFlagsOrExit(int argc, char** argv, const std::string& flags_file,
                      const std::string& usage);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_COMMAND_LINE_H_
