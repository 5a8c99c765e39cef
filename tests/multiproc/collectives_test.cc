// Broadcast, allgather, reducescatter, alltoall and barrier across real processes: every dtype,
// sizes 0, 1 and uneven, on the world, a proper subset and two disjoint sets at once. Each rank
// checks its results exactly against a reference; members of a set must print the same digest of
// what they all received (broadcast and allgather results).
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

// Runs the "collectives" scenario on `lists`; `set_of[r]` groups ranks whose digests must agree
// (-1: not a member).
void RunCollectives(const std::string& lists, const std::vector<int>& set_of, bool large = false) {
  Tuttid tuttid;
  std::vector<std::string> args = {lists};
  if (large) args.push_back("large");
  auto ranks = StartRanks(tuttid, "collectives", {}, args);
  std::map<int, std::set<std::string>> digests;
  for (int r = 0; r < 4; ++r) {
    if (set_of[r] < 0) {
      EXPECT_TRUE(ranks[r]->ReadUntil("not a member", In(60))) << ranks[r]->transcript();
      continue;
    }
    EXPECT_TRUE(ranks[r]->ReadUntil("collectives ok", In(240))) << ranks[r]->transcript();
    EXPECT_TRUE(ranks[r]->ReadUntil("barrier ok", In(60))) << ranks[r]->transcript();
    if (large) {
      EXPECT_TRUE(ranks[r]->ReadUntil("large ok", In(240))) << ranks[r]->transcript();
    }
    auto digest = ranks[r]->ReadUntil("digest ", In(60));
    ASSERT_TRUE(digest) << ranks[r]->transcript();
    digests[set_of[r]].insert(*digest);
  }
  ExpectAllSucceed(ranks, 240);
  for (const auto& [set, distinct] : digests)
    EXPECT_EQ(distinct.size(), 1u) << "members of set " << set << " received different bytes";
}

TEST(Collectives, World) { RunCollectives("0,1,2,3", {0, 0, 0, 0}); }
TEST(Collectives, ProperSubset) { RunCollectives("0,2,3", {0, -1, 0, 0}); }
TEST(Collectives, TwoDisjointSetsAtOnce) { RunCollectives("0,1|2,3", {0, 0, 1, 1}); }

#if !defined(TUTTI_SANITIZED)
TEST(Collectives, Large64MiBOnTheWorld) { RunCollectives("0,1,2,3", {0, 0, 0, 0}, /*large=*/true); }
#endif

}  // namespace
}  // namespace tutti::testing
