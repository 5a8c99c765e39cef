// Allreduce across real worker processes and a real tuttid on loopback, and (where a case needs
// no process of its own) across ranks living in the test process.
#include <signal.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

namespace tutti::testing {
namespace {

// Every dtype x op, exact values, bool's refused average (the same status and message on every
// rank), scale factors on floating and integer types; then every rank must hold the same bits.
void RunMatrix(int size) {
  Tuttid tuttid;
  RankOptions options;
  options.size = size;
  auto ranks = StartRanks(tuttid, "matrix", options);
  std::map<std::string, std::set<std::string>> hashes;  // dtype -> distinct hashes seen
  for (auto& rank : ranks) {
    auto refused = rank->ReadUntil("refused ", In(240));
    ASSERT_TRUE(refused) << rank->transcript();
    EXPECT_EQ(*refused, "-1 allreduce 'bool.average': average is not defined for bool tensors; use "
                        "sum (logical or) or min (logical and)");
    ASSERT_TRUE(rank->ReadUntil("matrix ok", In(60))) << rank->transcript();
    ASSERT_TRUE(rank->ReadUntil("scaled ok", In(60))) << rank->transcript();
    ASSERT_TRUE(rank->ReadUntil("int scaled ok", In(60))) << rank->transcript();
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

// A set of one combines nothing, yet a bool reduction's result is 0 or 1 there too.
TEST(Allreduce, BoolResultIsZeroOrOneEvenOnASetOfOne) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 1);
  std::vector<uint8_t> flags = {0, 2, 0x80, 1}, expected = {0, 1, 1, 1};
  int64_t shape[] = {4};
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = flags.data();
  t.dtype = TUTTI_DTYPE_BOOL;
  t.ndim = 1;
  t.shape = shape;
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = TUTTI_OP_MIN;
  tutti_request_t request = nullptr;
  ASSERT_EQ(tutti_reducescatter(job[0], "rs", TUTTI_WORLD, &t, &options, &request), TUTTI_OK)
      << tutti_last_error();
  ASSERT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  ASSERT_EQ(tutti_request_output(request, &out), TUTTI_OK);
  ASSERT_EQ(out.dtype, TUTTI_DTYPE_BOOL);
  EXPECT_EQ(std::vector<uint8_t>(static_cast<const uint8_t*>(out.data),
                                 static_cast<const uint8_t*>(out.data) + 4),
            expected);
  tutti_request_free(request);
  ASSERT_EQ(tutti_allreduce(job[0], "ar", TUTTI_WORLD, &t, &t, nullptr, &request), TUTTI_OK)
      << tutti_last_error();
  ASSERT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
  tutti_request_free(request);
  EXPECT_EQ(flags, expected);
  EXPECT_EQ(job.Finalize(0), TUTTI_OK);
}

}  // namespace
}  // namespace tutti::testing
