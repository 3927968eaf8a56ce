// tests/unit/switch/pipeline_fixture.h: a SwitchPipeline under test, with fake
// time, and snapshots of its aggregators for "never touched" checks.
#ifndef ATP_TESTS_UNIT_SWITCH_PIPELINE_FIXTURE_H_
#define ATP_TESTS_UNIT_SWITCH_PIPELINE_FIXTURE_H_

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "atp/time.h"
#include "gtest/gtest.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/unit/switch/switch_test_util.h"

namespace atp::switch_emulator::testing {

inline constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);
inline constexpr TimeDelta kOrphanTimeout = TimeDelta::FromMilliseconds(1);
inline constexpr uint32_t kEcnThreshold = 10;
inline constexpr uint8_t kJobA = 1;
inline constexpr uint8_t kJobB = 2;
inline constexpr uint32_t kGroupA = 100;
inline constexpr uint32_t kGroupB = 200;

// AggregatorSnapshot: every state and value of a pipeline's array.
struct AggregatorSnapshot {
  std::vector<AggregatorState> states;
  std::vector<std::array<int32_t, kAggregatorLanes>> values;

  static AggregatorSnapshot Of(const SwitchPipeline& pipeline) {
    AggregatorSnapshot s;
    const AggregatorArray& a = pipeline.aggregators();
    for (size_t i = 0; i < a.size(); ++i) {
      s.states.push_back(a.state(i));
      // A free aggregator's values mean nothing (a claim overwrites them, and
      // a completion may leave them as they were): they read as zeros here.
      std::array<int32_t, kAggregatorLanes> v{};
      if (!a.state(i).is_free()) {
        for (size_t k = 0; k < kAggregatorLanes; ++k) v[k] = a.values(i).lanes[k];
      }
      s.values.push_back(v);
    }
    return s;
  }
  friend bool operator==(const AggregatorSnapshot&, const AggregatorSnapshot&) = default;
};

class PipelineTest : public ::testing::Test {
 protected:
  // BaseConfig: 64 aggregators, dynamic; job A and job B both at level 1.
  static PipelineConfig BaseConfig() {
    PipelineConfig c;
    c.aggregator_count = 64;
    c.orphan_timeout = kOrphanTimeout;
    c.ecn_threshold = kEcnThreshold;
    c.orphan_scan_per_packet = 0;  // tests of rule 7 turn it on
    c.jobs = {{.job = kJobA, .levels = JobLevels::kLevel1, .multicast_group = kGroupA},
              {.job = kJobB, .levels = JobLevels::kLevel1, .multicast_group = kGroupB}};
    return c;
  }

  void Build(const PipelineConfig& config) {
    absl::StatusOr<SwitchPipeline> p = SwitchPipeline::Create(config);
    ASSERT_TRUE(p.ok()) << p.status();
    pipeline_.emplace(*std::move(p));
  }
  void SetUp() override { Build(BaseConfig()); }

  SwitchPipeline& pipeline() { return *pipeline_; }

  // Send: Process, and check the pipeline left every valid ATP frame valid.
  Decision Send(TestFrame& f, TimePoint now = kT0, uint32_t egress_queue_depth = 0) {
    const bool was_valid = Decode(f).error == wire::DecodeError::kOk;
    Decision d = pipeline_->Process(f.span(), now, egress_queue_depth);
    if (was_valid) {
      EXPECT_EQ(Decode(f).error, wire::DecodeError::kOk) << "pipeline broke a valid frame";
    }
    return d;
  }
  Verdict SendVerdict(TestFrame& f, TimePoint now = kT0, uint32_t egress_queue_depth = 0) {
    return Send(f, now, egress_queue_depth).verdict;
  }

  // Values: the 62 values of aggregator i, as a payload (two's complement).
  wire::Payload Values(size_t i) const {
    wire::Payload p;
    for (size_t k = 0; k < p.size(); ++k) {
      p[k] = static_cast<uint32_t>(pipeline_->aggregators().values(i).lanes[k]);
    }
    return p;
  }
  const AggregatorState& State(size_t i) const { return pipeline_->aggregators().state(i); }

  std::optional<SwitchPipeline> pipeline_;
};

}  // namespace atp::switch_emulator::testing

#endif  // ATP_TESTS_UNIT_SWITCH_PIPELINE_FIXTURE_H_
