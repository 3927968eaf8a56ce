// PollingOptions::cpus: a polling thread runs only on the CPU its index
// picks (cpus[index mod size]), SharedIoThreads' thread i on the i-th, and a
// CPU this process may not run on is refused naming it.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/shared_io_threads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/host/polling_thread.h"
#include "lib/runtime/loop_threads.h"
#include "tests/unit/runtime/affinity_probe.h"

namespace atp::host {
namespace {

using ::testing::HasSubstr;

TEST(PinnedThreadTest, TheIndexPicksTheCpu) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs this process may run on";
  PollingOptions options;
  options.cpus = {allowed[0], allowed[1]};
  AffinityProbe probe;
  // Thread 3 of its group: cpus[3 mod 2].
  auto thread = PollingThread::Start("pinned", options, /*index=*/3);
  ASSERT_TRUE(thread.ok()) << thread.status();
  (*thread)->Add({}, probe.Step());
  EXPECT_EQ(probe.Cpus(), std::vector<int>{allowed[1]});
}

TEST(PinnedThreadTest, UnpinnedByDefault) {
  AffinityProbe probe;
  auto thread = PollingThread::Start("unpinned", PollingOptions{});
  ASSERT_TRUE(thread.ok()) << thread.status();
  (*thread)->Add({}, probe.Step());
  EXPECT_EQ(probe.Cpus(), AllowedCpus());
}

TEST(PinnedThreadTest, SharedThreadsTakeTheCpusInTurn) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs this process may run on";
  PollingOptions options;
  options.cpus = {allowed[1], allowed[0]};
  // Declared first: the probes outlive the threads that run their steps.
  std::vector<std::unique_ptr<AffinityProbe>> probes;
  absl::StatusOr<std::shared_ptr<SharedIoThreads>> group = SharedIoThreads::Create(3, options);
  ASSERT_TRUE(group.ok()) << group.status();
  for (const auto& thread : (*group)->threads().all) {
    probes.push_back(std::make_unique<AffinityProbe>());
    thread->Add({}, probes.back()->Step());
  }
  EXPECT_EQ(probes[0]->Cpus(), std::vector<int>{allowed[1]});
  EXPECT_EQ(probes[1]->Cpus(), std::vector<int>{allowed[0]});
  EXPECT_EQ(probes[2]->Cpus(), std::vector<int>{allowed[1]});
}

TEST(PinnedThreadTest, ACpuThisProcessMayNotUseIsRefusedNamingIt) {
  const std::vector<int> allowed = AllowedCpus();
  int forbidden = -1;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && forbidden < 0; --cpu) {
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) forbidden = cpu;
  }
  if (forbidden < 0) GTEST_SKIP() << "this process may run on every CPU id";
  PollingOptions options;
  options.cpus = {forbidden};
  auto thread = PollingThread::Start("refused", options);
  ASSERT_FALSE(thread.ok());
  EXPECT_EQ(thread.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(thread.status().message(),
              HasSubstr(absl::StrCat("PollingOptions.cpus: CPU ", forbidden,
                                     " is not one this process may run on")));
}

TEST(PinnedThreadTest, IdsOutOfRangeAreInvalidOptions) {
  PollingOptions options;
  options.cpus = {0, -1};
  EXPECT_THAT(options.Validate().message(), HasSubstr("PollingOptions.cpus: -1 is not a CPU id"));
  options.cpus = {CPU_SETSIZE};
  EXPECT_FALSE(options.Validate().ok());
}

}  // namespace
}  // namespace atp::host
