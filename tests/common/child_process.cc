// tests/common/child_process.cc: ChildProcess.
#include "tests/common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace atp::test {
namespace {

std::string ReadWholeFile(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

::testing::AssertionResult ChildProcess::Spawn(const std::vector<std::string>& args) {
  if (pid_ > 0 || args.empty()) {
    return ::testing::AssertionFailure() << "Spawn: already running, or no program";
  }
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!output_.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_.stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (!output_.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, output_.stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  const int error = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    return ::testing::AssertionFailure()
           << "posix_spawn(" << args[0] << "): " << std::strerror(error);
  }
  return ::testing::AssertionSuccess();
}

void ChildProcess::RecordExit(int status) {
  pid_ = -1;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ChildProcess::Wait(std::chrono::milliseconds patience) {
  if (pid_ <= 0) return exit_status_;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      RecordExit(status);
      exit_status_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  RecordExit(status);
  return exit_status_;
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
  RecordExit(status);
  return false;
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::string ChildProcess::Stdout() const { return ReadWholeFile(output_.stdout_path); }
std::string ChildProcess::Stderr() const { return ReadWholeFile(output_.stderr_path); }

}  // namespace atp::test
