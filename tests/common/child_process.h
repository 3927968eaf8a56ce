// tests/common/child_process.h: a program run as a child process by a test
// (a tool, a daemon, a memif peer), that a failing test cannot leave behind.
//
//   ChildProcess ps({.stdout_path = dir + "/ps.out", .stderr_path = dir + "/ps.err"});
//   ASSERT_TRUE(ps.Spawn({ATP_PS_BINARY, "--job=1"}));
//   ...
//   ps.Signal(SIGTERM);
//   EXPECT_EQ(ps.Wait(std::chrono::seconds(30)), 0) << ps.Stderr();
#ifndef ATP_TESTS_COMMON_CHILD_PROCESS_H_
#define ATP_TESTS_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace atp::test {

// ChildOutput: where a child's stdout and stderr go: a file (created or
// truncated), or, when the path is empty, the test's own.
struct ChildOutput {
  std::string stdout_path;
  std::string stderr_path;
};

// ChildProcess: one child, spawned from argv (posix_spawn, no shell; stdin
// /dev/null; the test's environment). The destructor kills it (SIGKILL) and
// reaps it if it is still running. Use from the test's thread only.
class ChildProcess {
 public:
  ChildProcess() = default;
  explicit ChildProcess(ChildOutput output) : output_(std::move(output)) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // Spawn: starts args[0] (a path) with argv `args`; fails naming the
  // program when it cannot be started. Once per ChildProcess.
  ::testing::AssertionResult Spawn(const std::vector<std::string>& args);

  // Wait: the child's exit status once it has exited within `patience`;
  // -1 if it died of a signal or had to be killed (SIGKILL) when `patience`
  // ran out, or was never started. After it has been reaped (by Wait or
  // Running), the same status again.
  int Wait(std::chrono::milliseconds patience);

  // Running: true while the child runs; reaps it when it has exited.
  bool Running();
  // unreaped: spawned, and its exit not yet collected by Wait or Running
  // (it may have exited meanwhile).
  bool unreaped() const { return pid_ > 0; }

  // Signal: sends `sig` to the child if it has not been reaped.
  void Signal(int sig) const;

  // The files of ChildOutput, whole ("" when not redirected or unreadable).
  std::string Stdout() const;
  std::string Stderr() const;
  const ChildOutput& output() const { return output_; }

 private:
  void RecordExit(int status);

  ChildOutput output_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

}  // namespace atp::test

#endif  // ATP_TESTS_COMMON_CHILD_PROCESS_H_
