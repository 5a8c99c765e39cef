// Allreduce across real worker processes and a real tuttid on loopback.
#include <signal.h>

#include <set>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

// Every dtype x op, exact values, scale factors; then every rank must hold the same bits.
void RunMatrix(int size) {
  Tuttid tuttid;
  RankOptions options;
  options.size = size;
  auto ranks = StartRanks(tuttid, "matrix", options);
  std::map<std::string, std::set<std::string>> hashes;  // dtype -> distinct hashes seen
  for (auto& rank : ranks) {
    ASSERT_TRUE(rank->ReadUntil("matrix ok", In(240))) << rank->transcript();
    ASSERT_TRUE(rank->ReadUntil("scaled ok", In(60))) << rank->transcript();
    for (int i = 0; i < 4; ++i) {
      auto line = rank->ReadUntil("hash ", In(60));
      ASSERT_TRUE(line) << rank->transcript();
      auto space = line->find(' ');
      hashes[line->substr(0, space)].insert(line->substr(space + 1));
    }
  }
  ExpectAllSucceed(ranks);
  ASSERT_EQ(hashes.size(), 4u);
  for (const auto& [dtype, distinct] : hashes)
    EXPECT_EQ(distinct.size(), 1u) << dtype << " results differ between ranks";
}

TEST(Allreduce, EveryDTypeAndOpOnFourRanks) { RunMatrix(4); }
TEST(Allreduce, EveryDTypeAndOpOnTwoRanks) { RunMatrix(2); }

TEST(Allreduce, ThreeRanksUnevenChunksAndTopology) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "basic", 3);
  for (int r = 0; r < 3; ++r) {
    auto world = ranks[r]->ReadUntil("world ", In(60));
    ASSERT_TRUE(world) << ranks[r]->transcript();
    // One host: local rank = rank, local size = 3, one rank per cross group.
    EXPECT_EQ(*world, std::to_string(r) + " 3 " + std::to_string(r) + " 3 0 1");
    EXPECT_TRUE(ranks[r]->ReadUntil("basic ok", In(120))) << ranks[r]->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST(Allreduce, HostsFromHostIdentity) {
  // Ranks 0,1 on host "a", 2,3 on host "b" (TUTTI_HOST_ID stands in for two machines).
  Tuttid tuttid;
  RankOptions options;
  options.rank_env = [](int r) {
    return std::map<std::string, std::string>{{"TUTTI_HOST_ID", r < 2 ? "a" : "b"}};
  };
  auto ranks = StartRanks(tuttid, "basic", options);
  ExpectTwoByTwoTopology(ranks);
  ExpectAllSucceed(ranks);
}

TEST(Allreduce, MismatchFailsOnEveryMemberWithOneMessageThenRecovers) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "mismatch", 4);
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("mismatch ", In(60));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_EQ(*line,
              "-5 mismatched 't' on process set 0: rank 0 sent allreduce float32[4] op=sum, "
              "rank 3 sent allreduce float32[5] op=sum");
    EXPECT_TRUE(rank->ReadUntil("next ok", In(60))) << rank->transcript();
  }
  ExpectAllSucceed(ranks);
}

}  // namespace
}  // namespace tutti::testing
