// examples/atp_sim/command_line.h: parsing atp-sim's command line with the
// exit codes a tool should have: --help prints every flag and exits 0; an
// unknown flag, a malformed value or a positional argument prints one clear
// line and exits 2 (Abseil alone would exit 1 for both).
#ifndef ATP_EXAMPLES_ATP_SIM_COMMAND_LINE_H_
#define ATP_EXAMPLES_ATP_SIM_COMMAND_LINE_H_

namespace atp::sim_tool {

inline constexpr int kExitUsage = 2;

// ParseCommandLineOrExit: parses argv into the Abseil flags, or exits.
void ParseCommandLineOrExit(int argc, char** argv);

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_COMMAND_LINE_H_
