// Allreduce across real worker processes and a real tuttid on loopback, and (where a case needs
// no process of its own) across ranks living in the test process.
#include <signal.h>

#include <cstdint>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

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

// Rank 3 submits "t" with 5 elements, the others with 4: every member fails with one message,
// then the same name reduces correctly once the failed one is settled. Needs no process of its
// own, so its ranks live in this one.
TEST(Allreduce, MismatchFailsOnEveryMemberWithOneMessageThenRecovers) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 4);
  job.OnEveryRank([&](int r) {
    FloatTensor t(r == 3 ? 5 : 4);
    tutti_request_t request = nullptr;
    ASSERT_EQ(tutti_allreduce(job[r], "t", TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request), TUTTI_OK)
        << tutti_last_error();
    EXPECT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_ERR_MISMATCH) << "rank " << r;
    EXPECT_EQ(std::string(tutti_last_error()),
              "mismatched 't' on process set 0: rank 0 sent allreduce float32[4] op=sum, "
              "rank 3 sent allreduce float32[5] op=sum")
        << "rank " << r;
    tutti_request_free(request);

    FloatTensor again(1000);
    for (int64_t i = 0; i < 1000; ++i) again.values[i] = static_cast<float>(r + i);
    ASSERT_EQ(tutti_allreduce(job[r], "t", TUTTI_WORLD, &again.desc, &again.desc, nullptr, &request),
              TUTTI_OK)
        << tutti_last_error();
    ASSERT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
    tutti_request_free(request);
    for (int64_t i = 0; i < 1000; ++i)  // ranks 0+1+2+3, and i from each of the four
      ASSERT_EQ(again.values[i], static_cast<float>(6 + 4 * i)) << "rank " << r << " element " << i;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(job.Finalize(r), TUTTI_OK) << "rank " << r;
}

}  // namespace
}  // namespace tutti::testing
