// The per-set tuner as a pure unit (server/core/autotuner.h): against a simulated set whose
// release rate depends on the values, it measures the starting values, tries every other value
// of each grid once, keeps the best, and converges on the fastest combination; pinned
// parameters never move; warm-up releases are not measured.
#include <gtest/gtest.h>

#include "server/core/autotuner.h"

namespace tutti::server {
namespace {

// A set whose every release moves 1 MB and takes a time that is least at fusion 4 MiB,
// small cut-off 64 KiB and pipeline 1 MiB.
struct SimulatedSet {
  Autotuner::Clock::time_point now{};
  std::chrono::microseconds Cost(const TuningValues& v) const {
    auto distance = [](int64_t a, int64_t b) { return a > b ? a / b : b / std::max<int64_t>(a, 1); };
    return std::chrono::microseconds(1000 + 100 * distance(v.fusion_threshold, 4 << 20) +
                                     50 * distance(v.small_allreduce_bytes, 64 << 10) +
                                     30 * distance(v.pipeline_bytes, 1 << 20));
  }
  // Releases until the tuner converges (or `limit` releases); returns how many it took.
  int Run(Autotuner& tuner, int limit = 100000) {
    int releases = 0;
    while (!tuner.converged() && releases < limit) {
      now += Cost(tuner.current());
      tuner.OnReleased(1, 1000000, now);
      ++releases;
    }
    return releases;
  }
};

const TuningValues kDefaults{1 << 20, 16 << 10, 256 << 10};

TEST(Autotuner, ConvergesOnTheFastestValuesAfterOneTrialPerCandidate) {
  AutotuneOptions options;
  options.trial_releases = 5;
  options.trial_duration = std::chrono::milliseconds(0);
  options.warmup_releases = 3;
  Autotuner tuner(kDefaults, options);
  SimulatedSet set;
  set.Run(tuner);
  ASSERT_TRUE(tuner.converged());
  EXPECT_EQ(tuner.current(), (TuningValues{4 << 20, 64 << 10, 1 << 20}));
  // The starting values once, then 5 + 4 + 3 other values.
  ASSERT_EQ(tuner.trials().size(), 13u);
  EXPECT_EQ(tuner.trials().front().values, kDefaults);
  const auto status = tuner.Status();
  EXPECT_EQ(status["state"], "converged");
  EXPECT_EQ(status["current"]["fusion_threshold"], 4 << 20);
  // Converged: no more trials, whatever is released.
  EXPECT_FALSE(tuner.OnReleased(100, 1, set.now + std::chrono::seconds(1)));
  EXPECT_EQ(tuner.trials().size(), 13u);
}

TEST(Autotuner, PinnedParametersNeverMoveAndATrialLastsItsMinimumDuration) {
  AutotuneOptions options;
  options.fusion_pinned = true;
  options.pipeline_pinned = true;
  options.trial_releases = 1;
  options.trial_duration = std::chrono::milliseconds(20);  // 20 releases of >= 1 ms
  options.warmup_releases = 0;
  Autotuner tuner(kDefaults, options);
  SimulatedSet set;
  set.Run(tuner);
  ASSERT_EQ(tuner.trials().size(), 5u);  // 1 + the 4 other small cut-offs
  for (const auto& trial : tuner.trials()) {
    EXPECT_EQ(trial.values.fusion_threshold, 1 << 20);
    EXPECT_EQ(trial.values.pipeline_bytes, 256 << 10);
  }
  EXPECT_EQ(tuner.current().small_allreduce_bytes, 64 << 10);
  // Five trials of at least 20 ms each (the first starts after the first release).
  EXPECT_GE(set.now - Autotuner::Clock::time_point{}, std::chrono::milliseconds(5 * 20));
  EXPECT_EQ(tuner.Status()["pinned"], (nlohmann::json{"fusion_threshold", "pipeline_bytes"}));
}

TEST(Autotuner, EverythingPinnedIsConvergedFromTheStart) {
  AutotuneOptions options;
  options.fusion_pinned = options.small_pinned = options.pipeline_pinned = true;
  Autotuner tuner(kDefaults, options);
  EXPECT_TRUE(tuner.converged());
  EXPECT_FALSE(tuner.OnReleased(1, 1, Autotuner::Clock::now()));
  EXPECT_TRUE(tuner.trials().empty());
}

}  // namespace
}  // namespace tutti::server
