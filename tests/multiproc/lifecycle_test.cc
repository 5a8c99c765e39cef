// A process that finalizes and initializes again, through the C ABI: it joins the job's next
// generation (membership epoch) while ranks still in the previous one go on undisturbed; the
// next generation's rendezvous names who is missing (docs/lifecycle.md).
#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

TEST(Lifecycle, ReinitJoinsTheNextGenerationWithoutDisturbingThePrevious) {
  Tuttid tuttid({"--log-level", "info"});
  RankOptions options;
  options.size = 3;
  options.job = UniqueJobId();
  options.env["TEST_STATIC_SETS"] = "1,2";
  auto ranks = StartRanks(tuttid, "reinit", options);
  ASSERT_TRUE(ranks[0]->ReadUntil("reinit", In(60))) << ranks[0]->transcript();
  // Rank 0 registered into generation 2 while ranks 1 and 2 are still in generation 1.
  ASSERT_TRUE(tuttid.process().ReadUntilContaining(
      "job '" + options.job + "': created by rank 0, waiting for 3 ranks (membership epoch 2)",
      In(60)))
      << tuttid.process().transcript();
  ranks[1]->WriteLine("go");
  ranks[2]->WriteLine("go");
  for (int r = 1; r <= 2; ++r)
    EXPECT_TRUE(ranks[r]->ReadUntil("undisturbed", In(60))) << ranks[r]->transcript();
  ExpectLineOnEvery(ranks, "generation 2 ok", "");
  ExpectAllSucceed(ranks);
}

TEST(Lifecycle, NextGenerationsRendezvousTimesOutNamingTheMissingRanks) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.job = UniqueJobId();
  auto ranks = StartRanks(tuttid, "reinit_alone", options);
  auto line = ranks[0]->ReadUntil("reinit ", In(60));
  ASSERT_TRUE(line) << ranks[0]->transcript();
  EXPECT_EQ(*line, "-8 rendezvous of job '" + options.job +
                       "' (membership epoch 2) timed out after 1500 ms: 1/2 ranks joined, "
                       "missing [1]");
  ranks[1]->WriteLine("go");
  ExpectLineOnEvery(ranks, "together ok", "");
  ExpectAllSucceed(ranks);
}

}  // namespace
}  // namespace tutti::testing
