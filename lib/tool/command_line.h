// lib/tool/command_line.h: the command line of a libatp tool, parsed into its
// Abseil flags with the exit codes a tool should have (Abseil alone exits 1
// for --help and for a bad flag alike):
//   --help (-h, -help, --helpfull, --helpshort): the usage text and the
//     tool's own flags on stdout, exit 0;
//   an unknown flag, a missing or malformed value, a positional argument: one
//     line "<program>: <why> (see --help)" on stderr, exit kExitBadUsage.
// Flags may be written --flag=value, --flag value, -flag, with dashes for
// underscores (--tensor-mb), and booleans as --flag / --noflag.
//
//   int main(int argc, char** argv) {
//     atp::tool::ParseCommandLineOrExit(argc, argv, "atp-ps",
//                                       {"examples/atp_ps/", "examples/common/"}, kUsage);
//     ...
//   }
#ifndef ATP_LIB_TOOL_COMMAND_LINE_H_
#define ATP_LIB_TOOL_COMMAND_LINE_H_

#include <string>
#include <string_view>
#include <vector>

namespace atp::tool {

// kExitBadUsage: every tool's exit status for a bad command line.
inline constexpr int kExitBadUsage = 2;

// ParseCommandLineOrExit: parses argv into the Abseil flags, or exits (see
// above). `program` names the tool in messages. A flag is the tool's own when
// the source file that defines it has one of `flag_sources` in its path
// ("examples/atp_ps/", "switch_emulator/daemon/main"); only those are
// accepted and listed by --help, sorted by name, after `usage`. Call once, from
// main, before any thread starts.
void ParseCommandLineOrExit(int argc, char** argv, std::string_view program,
                            const std::vector<std::string>& flag_sources, std::string_view usage);

// FlagGiven: whether --name (underscored: "tensor_floats") was on the command
// line that ParseCommandLineOrExit parsed, with any value (--noname counts),
// as opposed to holding its default. Lets a tool refuse a flag it would
// ignore (lib/tool/flag_checks.h, RefuseGiven).
bool FlagGiven(std::string_view name);

}  // namespace atp::tool

#endif  // ATP_LIB_TOOL_COMMAND_LINE_H_
