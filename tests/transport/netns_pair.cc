// tests/transport/netns_pair.cc
#include "tests/transport/netns_pair.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace atp::transport::testing {
namespace {

constexpr const char* kPrefix = "atpk";

int Run(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

void Remove(const std::string& name) { Run(absl::StrCat("ip netns del ", name)); }

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsPair>> NetnsPair::Create() {
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError("network namespaces and veth pairs need root");
  }
  if (Run("ip -V") != 0) return absl::FailedPreconditionError("the `ip` command is missing");
  RemoveStale();
  static std::atomic<int> counter{0};
  // From here on the destructor removes whatever was made, also on failure.
  std::unique_ptr<NetnsPair> pair(
      new NetnsPair(absl::StrCat(kPrefix, ::getpid(), "_", counter.fetch_add(1))));
  std::vector<std::string> commands;
  for (const std::string& ns : {pair->a_, pair->b_}) {
    const std::string exec = absl::StrCat("ip netns exec ", ns, " ");
    commands.push_back(absl::StrCat("ip netns add ", ns));
    commands.push_back(exec + "sysctl -w net.ipv6.conf.all.disable_ipv6=1");
    commands.push_back(exec + "sysctl -w net.ipv6.conf.default.disable_ipv6=1");
    commands.push_back(absl::StrCat("ip -n ", ns, " link set dev lo up"));
  }
  commands.push_back(absl::StrCat("ip link add name ", kVethA, " netns ", pair->a_,
                                  " type veth peer name ", kVethB, " netns ", pair->b_));
  commands.push_back(absl::StrCat("ip -n ", pair->a_, " addr add ", pair->ip_a().ToString(),
                                  "/24 dev ", kVethA));
  commands.push_back(absl::StrCat("ip -n ", pair->b_, " addr add ", pair->ip_b().ToString(),
                                  "/24 dev ", kVethB));
  commands.push_back(absl::StrCat("ip -n ", pair->a_, " link set dev ", kVethA, " up"));
  commands.push_back(absl::StrCat("ip -n ", pair->b_, " link set dev ", kVethB, " up"));
  for (const std::string& command : commands) {
    if (Run(command) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("`", command, "` failed"));
    }
  }
  return pair;
}

NetnsPair::~NetnsPair() {
  Remove(a_);  // deleting either namespace deletes the veth pair
  Remove(b_);
}

wire::Ipv4Address NetnsPair::ip_a() const { return *wire::Ipv4Address::Parse("192.168.251.1"); }
wire::Ipv4Address NetnsPair::ip_b() const { return *wire::Ipv4Address::Parse("192.168.251.2"); }

void NetnsPair::RemoveStale() {
  DIR* dir = ::opendir("/var/run/netns");
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + std::strlen(kPrefix)));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : stale) Remove(name);
}

absl::Status RunInNetns(const std::string& name, const std::function<void()>& fn) {
  absl::Status status;
  // A thread of its own: setns moves only the calling thread, and this one
  // ends afterwards, so no other code ever runs in the wrong namespace.
  std::thread thread([&] {
    const std::string path = absl::StrCat("/var/run/netns/", name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = absl::NotFoundError(absl::StrCat("open(", path, "): ", std::strerror(errno)));
      return;
    }
    const int ret = ::setns(fd, CLONE_NEWNET);
    const int error = errno;
    ::close(fd);
    if (ret != 0) {
      status = absl::PermissionDeniedError(
          absl::StrCat("setns(", path, "): ", std::strerror(error), " (needs root)"));
      return;
    }
    fn();
  });
  thread.join();
  return status;
}

absl::StatusOr<std::unique_ptr<KernelUdpDevice>> OpenKernelUdpDeviceIn(
    const std::string& name, const KernelUdpOptions& options) {
  absl::StatusOr<std::unique_ptr<KernelUdpDevice>> device =
      absl::InternalError("not opened");
  if (absl::Status s = RunInNetns(name, [&] { device = OpenKernelUdpDevice(options); }); !s.ok()) {
    return s;
  }
  return device;
}

}  // namespace atp::transport::testing
