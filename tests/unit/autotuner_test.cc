// The per-set tuner as a pure unit (server/core/autotuner.h): against simulated sets whose
// members execute each release in a time that depends on the values and report it with their
// next announcement, it measures the starting values, tries every other value of each grid once,
// confirms the finalists and converges on the fastest combination; each trial is scored by
// exactly the collectives that ran with its values; two sets sharing one step loop (and so one
// wall clock) settle on their own, different values; a lucky single measurement does not win;
// members that never report leave it to the wall clock; pinned parameters never move.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "server/core/autotuner.h"

namespace tutti::server {
namespace {

using std::chrono::microseconds;
using Clock = Autotuner::Clock;

// How far v is from the best value b, as a factor (>= 1).
int64_t Distance(int64_t v, int64_t b) { return v > b ? v / b : b / std::max<int64_t>(v, 1); }

// Fastest at `best`: every release of 1 MB takes 1 ms plus a penalty per parameter off it.
std::function<microseconds(const TuningValues&)> CostAround(TuningValues best) {
  return [best](const TuningValues& v) {
    return microseconds(1000 + 100 * Distance(v.fusion_threshold, best.fusion_threshold) +
                        50 * Distance(v.small_allreduce_bytes, best.small_allreduce_bytes) +
                        30 * Distance(v.pipeline_bytes, best.pipeline_bytes));
  };
}

constexpr uint64_t kBytes = 1000000;  // per release

// One set of two members: each step its members announce (reporting what they executed since
// their last announcement, per measurement period), tuttid releases one collective, and both
// members run it in cost(values) of their own time.
struct SimulatedSet {
  std::function<microseconds(const TuningValues&)> cost;
  bool members_report = true;
  struct Totals {
    uint64_t collectives = 0, bytes = 0, ns = 0;
    bool changed = false;
  };
  std::map<uint32_t, Totals> executed[2];  // by member, by period

  void Announce(Autotuner& tuner, Clock::time_point now) {
    if (!members_report) return;
    for (int32_t member = 0; member < 2; ++member)
      for (auto& [period, t] : executed[member])
        if (t.changed) {
          t.changed = false;
          tuner.OnExecuted(member, period, t.collectives, t.bytes, t.ns, 2, now);
        }
  }
  // Releases and runs one collective; returns the time it took.
  microseconds Release(Autotuner& tuner, Clock::time_point now) {
    const uint32_t period = tuner.period();
    const microseconds spent = cost(tuner.current());
    tuner.OnReleased(1, kBytes, 1, 2, now);
    for (auto& member : executed) {
      Totals& t = member[period];
      ++t.collectives;
      t.bytes += kBytes;
      t.ns += static_cast<uint64_t>(std::chrono::nanoseconds(spent).count());
      t.changed = true;
    }
    return spent;
  }
};

// Steps the sets, one after the other in each step (one step loop), until every tuner converged
// (or `limit` steps); the wall clock is shared: each set's release waits for the other's work.
int RunSteps(std::vector<std::pair<SimulatedSet*, Autotuner*>> sets, Clock::time_point* now,
        int limit = 100000) {
  int steps = 0;
  auto done = [&] {
    for (auto& [set, tuner] : sets)
      if (!tuner->converged()) return false;
    return true;
  };
  while (!done() && steps < limit) {
    for (auto& [set, tuner] : sets) {
      set->Announce(*tuner, *now);
      *now += set->Release(*tuner, *now);
    }
    ++steps;
  }
  return steps;
}

const TuningValues kDefaults{1 << 20, 16 << 10, 256 << 10};
const TuningValues kFastest{4 << 20, 64 << 10, 1 << 20};

AutotuneOptions Short() {
  AutotuneOptions options;
  options.trial_releases = 5;
  options.trial_duration = std::chrono::milliseconds(0);
  options.warmup_releases = 3;
  return options;
}

double Rate(microseconds spent) { return kBytes * 1e6 / static_cast<double>(spent.count()); }

TEST(Autotuner, ConvergesOnTheFastestValuesScoringEachTrialByItsOwnCollectives) {
  Autotuner tuner(kDefaults, Short());
  SimulatedSet set{CostAround(kFastest)};
  Clock::time_point now{};
  RunSteps({{&set, &tuner}}, &now);
  ASSERT_TRUE(tuner.converged());
  EXPECT_EQ(tuner.current(), kFastest);
  // The starting values once, then 5 + 4 + 3 other values, then the 3 finalists again.
  ASSERT_EQ(tuner.trials().size(), 13u + 3u);
  EXPECT_EQ(tuner.trials().front().values, kDefaults);
  for (size_t i = 0; i < tuner.trials().size(); ++i) {
    const auto& trial = tuner.trials()[i];
    EXPECT_TRUE(trial.own_time);
    EXPECT_EQ(trial.confirmation, i >= 13);
    // Exactly the rate of the trial's own values: no collective of a neighbouring trial (the
    // reports arrive a step late, while the next values already run) is counted in it.
    const double rate = Rate(set.cost(trial.values));
    EXPECT_NEAR(trial.bytes_per_second, rate, rate * 1e-9) << i;
  }
  // The finalists: the pass's best two and the starting values.
  EXPECT_EQ(tuner.trials()[13].values, kFastest);
  bool start_confirmed = false;
  for (size_t i = 13; i < 16; ++i) start_confirmed |= tuner.trials()[i].values == kDefaults;
  EXPECT_TRUE(start_confirmed);
  const auto status = tuner.Status();
  EXPECT_EQ(status["state"], "converged");
  EXPECT_EQ(status["current"]["fusion_threshold"], 4 << 20);
  EXPECT_EQ(status["trials"][0]["scored_by"], "execution time");
  // Converged: no more trials, whatever is released or reported.
  EXPECT_FALSE(tuner.OnReleased(100, 1, 100, 2, now + std::chrono::seconds(1)));
  EXPECT_FALSE(tuner.OnExecuted(0, tuner.period(), 1000, 1, 1, 2, now + std::chrono::seconds(1)));
  EXPECT_EQ(tuner.trials().size(), 16u);
}

TEST(Autotuner, TwoSetsSharingOneStepLoopSettleOnTheirOwnValues) {
  // Many small tensors want no fusion cap and the direct exchange; few large ones the opposite.
  // Each set's wall time between releases includes the other's work, which changes with the
  // other's trials; their own execution time does not.
  const TuningValues many_best{256 << 10, 256 << 10, 64 << 10};
  const TuningValues few_best{64 << 20, 4 << 10, 4 << 20};
  SimulatedSet many{CostAround(many_best)}, few{CostAround(few_best)};
  // The large set's time dwarfs the small one's: 20 ms plus its penalties, ten times over.
  few.cost = [inner = CostAround(few_best)](const TuningValues& v) {
    return microseconds(19000) + 10 * inner(v);
  };
  Autotuner many_tuner(kDefaults, Short()), few_tuner(kDefaults, Short());
  Clock::time_point now{};
  RunSteps({{&many, &many_tuner}, {&few, &few_tuner}}, &now);
  ASSERT_TRUE(many_tuner.converged() && few_tuner.converged());
  EXPECT_EQ(many_tuner.current(), many_best);
  EXPECT_EQ(few_tuner.current(), few_best);
  EXPECT_FALSE(many_tuner.current() == few_tuner.current());
}

TEST(Autotuner, ALuckyMeasurementDoesNotWinTheConfirmationRound) {
  // The starting values are truly the fastest (1 ms), everything else takes 1.1 ms; but the
  // trial of a 64 MiB fusion threshold happens to run 15% faster, once.
  auto run = [](size_t finalists) {
    AutotuneOptions options = Short();
    options.finalists = finalists;
    Autotuner tuner(kDefaults, options);
    TuningValues lucky = kDefaults;
    lucky.fusion_threshold = 64 << 20;
    bool lucky_used = false;
    SimulatedSet set{[&](const TuningValues& v) {
      if (v == kDefaults) return microseconds(1000);
      if (v == lucky && !lucky_used) return microseconds(935);
      return microseconds(1100);
    }};
    Clock::time_point now{};
    // The luck lasts for the pass; the confirmation round measures the truth.
    int steps = 0;
    while (!tuner.converged() && steps++ < 10000) {
      const bool confirming = tuner.trials().size() >= 13;
      if (confirming) lucky_used = true;
      set.Announce(tuner, now);
      now += set.Release(tuner, now);
    }
    EXPECT_TRUE(tuner.converged());
    return tuner.current();
  };
  // Without confirmation the single lucky trial wins.
  EXPECT_EQ(run(0).fusion_threshold, 64 << 20);
  // With it, the lucky values measure 1.1 ms again: the mean of the two loses to the start.
  EXPECT_EQ(run(3), kDefaults);
}

TEST(Autotuner, FinalistsMustBeatTheStartingValuesByTheMinimumGain) {
  // Everything else is 1% faster than the start: within min_gain (2%), so the start stays.
  SimulatedSet set{[](const TuningValues& v) {
    return v == kDefaults ? microseconds(1010) : microseconds(1000);
  }};
  Autotuner tuner(kDefaults, Short());
  Clock::time_point now{};
  RunSteps({{&set, &tuner}}, &now);
  ASSERT_TRUE(tuner.converged());
  EXPECT_EQ(tuner.current(), kDefaults);
}

TEST(Autotuner, MembersThatNeverReportLeaveItToTheWallClock) {
  // An earlier library (protocol 5) sends no execution times: the first trial waits out its
  // grace, then every trial is scored by bytes released per wall second, and the search still
  // finds the fastest values of a set alone in its loop.
  Autotuner tuner(kDefaults, Short());
  SimulatedSet set{CostAround(kFastest)};
  set.members_report = false;
  Clock::time_point now{};
  RunSteps({{&set, &tuner}}, &now);
  ASSERT_TRUE(tuner.converged());
  EXPECT_EQ(tuner.current(), kFastest);
  ASSERT_EQ(tuner.trials().size(), 16u);
  for (const auto& trial : tuner.trials()) EXPECT_FALSE(trial.own_time);
  EXPECT_EQ(tuner.Status()["trials"][0]["scored_by"], "wall clock");
}

TEST(Autotuner, PinnedParametersNeverMoveAndATrialLastsItsMinimumDuration) {
  AutotuneOptions options;
  options.fusion_pinned = true;
  options.pipeline_pinned = true;
  options.trial_releases = 1;
  options.trial_duration = std::chrono::milliseconds(20);  // 20 releases of >= 1 ms
  options.warmup_releases = 0;
  Autotuner tuner(kDefaults, options);
  SimulatedSet set{CostAround(kFastest)};
  Clock::time_point now{};
  RunSteps({{&set, &tuner}}, &now);
  ASSERT_EQ(tuner.trials().size(), 5u + 3u);  // 1 + the 4 other small cut-offs, 3 finalists
  for (const auto& trial : tuner.trials()) {
    EXPECT_EQ(trial.values.fusion_threshold, 1 << 20);
    EXPECT_EQ(trial.values.pipeline_bytes, 256 << 10);
  }
  EXPECT_EQ(tuner.current().small_allreduce_bytes, 64 << 10);
  // Eight trials of at least 20 ms each (the first starts after the first release).
  EXPECT_GE(now - Clock::time_point{}, std::chrono::milliseconds(8 * 20));
  EXPECT_EQ(tuner.Status()["pinned"], (nlohmann::json{"fusion_threshold", "pipeline_bytes"}));
}

TEST(Autotuner, EverythingPinnedIsConvergedFromTheStart) {
  AutotuneOptions options;
  options.fusion_pinned = options.small_pinned = options.pipeline_pinned = true;
  Autotuner tuner(kDefaults, options);
  EXPECT_TRUE(tuner.converged());
  EXPECT_FALSE(tuner.OnReleased(1, 1, 1, 2, Clock::now()));
  EXPECT_TRUE(tuner.trials().empty());
}

}  // namespace
}  // namespace tutti::server
