// tests/unit/tool/flag_checks_test.cc: the shared checks of flag values
// (lib/tool/flag_checks.h): each error names its flag; files are checked by
// creating them (and nothing is left behind); the back-off flags.
#include "lib/tool/flag_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp::tool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

class FlagChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atp-flag-checks-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FlagChecksTest, RangeNamesTheFlag) {
  EXPECT_TRUE(CheckRange("count", 5, 1, 10).ok());
  EXPECT_EQ(MessageOf(CheckRange("count", 0, 1, 10)), "--count: 0 is not in 1..10");
  EXPECT_EQ(CheckRange("count", 11, 1, 10).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FlagChecksTest, WritableFileIsTriedAndNothingIsLeft) {
  EXPECT_TRUE(CheckWritableFile("stats_json", "").ok());  // off
  EXPECT_TRUE(CheckWritableFile("stats_json", dir_ + "/s.json").ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "the check left a file behind";
  EXPECT_THAT(MessageOf(CheckWritableFile("stats_json", dir_ + "/absent/s.json")),
              StartsWith("--stats_json: its directory '" + dir_ + "/absent' does not exist"));
  EXPECT_THAT(MessageOf(CheckWritableFile("stats_json", dir_)),
              StartsWith("--stats_json: '" + dir_ + "' is a directory"));
  EXPECT_THAT(MessageOf(CheckWritableFile("stats_json", "/proc/version/s.json")),
              HasSubstr("is not a directory"));
  if (::geteuid() != 0) {  // root may write anywhere
    ASSERT_EQ(::chmod(dir_.c_str(), 0500), 0);
    EXPECT_THAT(MessageOf(CheckWritableFile("stats_json", dir_ + "/s.json")),
                StartsWith("--stats_json: cannot create files in"));
    ::chmod(dir_.c_str(), 0700);
  }
}

TEST_F(FlagChecksTest, WritableDirectory) {
  EXPECT_TRUE(CheckWritableDirectory("pcap_dir", dir_).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  EXPECT_THAT(MessageOf(CheckWritableDirectory("pcap_dir", dir_ + "/absent")),
              StartsWith("--pcap_dir: '"));
}

TEST_F(FlagChecksTest, MemoryBeyondHalfTheMachineIsRefused) {
  EXPECT_TRUE(CheckMemory("tensor_floats", 1e6, "tensors").ok());
  if (PhysicalMemoryBytes() <= 0) GTEST_SKIP() << "this machine's memory is unknown";
  EXPECT_THAT(MessageOf(CheckMemory("tensor_floats", PhysicalMemoryBytes(), "3 tensors")),
              StartsWith("--tensor_floats: 3 tensors need "));
}

TEST_F(FlagChecksTest, PollingFlags) {
  absl::StatusOr<PollingOptions> p = PollingFromFlags(
      {.spin_iterations = 5, .yield_iterations = 0, .min_sleep_us = 10, .max_sleep_us = 200});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spin_iterations, 5u);
  EXPECT_EQ(p->min_sleep, absl::Microseconds(10));
  EXPECT_EQ(p->max_sleep, absl::Microseconds(200));
  EXPECT_TRUE(p->Validate().ok());
  // A default first sleep above a smaller given maximum is lowered to it.
  p = PollingFromFlags({.min_sleep_us = 20, .max_sleep_us = 5});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->min_sleep, absl::Microseconds(5));
  EXPECT_THAT(MessageOf(PollingFromFlags({.min_sleep_us = 20, .max_sleep_us = 0}).status()),
              StartsWith("--max_sleep_us:"));
  EXPECT_THAT(MessageOf(PollingFromFlags({.min_sleep_us = 0, .max_sleep_us = 10}).status()),
              StartsWith("--min_sleep_us:"));
  EXPECT_THAT(MessageOf(PollingFromFlags({.spin_iterations = -1, .min_sleep_us = 1,
                                          .max_sleep_us = 1}).status()),
              StartsWith("--spin_iterations:"));
  EXPECT_THAT(MessageOf(PollingFromFlags({.yield_iterations = -1, .min_sleep_us = 1,
                                          .max_sleep_us = 1}).status()),
              StartsWith("--yield_iterations:"));
  EXPECT_THAT(MessageOf(PollingFromFlags({.min_sleep_us = 1, .max_sleep_us = 2'000'000}).status()),
              StartsWith("--max_sleep_us:"));
  p = PollingFromFlags({.busy_poll = true});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->yield_iterations, 0u);
  EXPECT_TRUE(p->cpus.empty());
  // --cpus: ids, with or without --busy_poll.
  p = PollingFromFlags({.min_sleep_us = 1, .max_sleep_us = 1, .cpus = "1,0,3"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cpus, (std::vector<int>{1, 0, 3}));
  p = PollingFromFlags({.busy_poll = true, .cpus = "2"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cpus, std::vector<int>{2});
  for (const char* bad : {"x", "0,", "-1", "1024", "0;1"}) {
    EXPECT_THAT(MessageOf(PollingFromFlags({.min_sleep_us = 1, .max_sleep_us = 1, .cpus = bad})
                              .status()),
                StartsWith("--cpus: '"))
        << bad;
  }
}

TEST_F(FlagChecksTest, MetricsFlags) {
  EXPECT_TRUE(CheckMetricsFlags(-1, "127.0.0.1").ok());
  EXPECT_TRUE(CheckMetricsFlags(0, "0.0.0.0").ok());
  EXPECT_THAT(MessageOf(CheckMetricsFlags(70000, "127.0.0.1")), StartsWith("--metrics_port:"));
  EXPECT_THAT(MessageOf(CheckMetricsFlags(9100, "localhost")), StartsWith("--metrics_address:"));
}

}  // namespace
}  // namespace atp::tool
