// Two "hosts" as network namespaces joined by a veth pair: tuttid and ranks 0,1 on host A
// (10.231.0.1), ranks 2,3 on host B (10.231.0.2). The data plane must pick the addresses that
// route between them, the coordinator must tell the hosts apart (local and cross ranks), and
// allreduce must cross the link. Needs root and iproute2; skipped otherwise.
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

class TwoHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    const std::string id = std::to_string(getpid());
    a_ = "tutti-a-" + id;
    b_ = "tutti-b-" + id;
    const std::string veth_a = "tta" + id, veth_b = "ttb" + id;  // at most 15 characters
    const std::string script =
        "set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + veth_a +
        " type veth peer name " + veth_b + "; ip link set " + veth_a + " netns " + a_ +
        "; ip link set " + veth_b + " netns " + b_ + "; ip -n " + a_ + " addr add 10.231.0.1/24 dev " +
        veth_a + "; ip -n " + b_ + " addr add 10.231.0.2/24 dev " + veth_b + "; ip -n " + a_ +
        " link set " + veth_a + " up; ip -n " + b_ + " link set " + veth_b + " up; ip -n " + a_ +
        " link set lo up; ip -n " + b_ + " link set lo up";
    created_ = true;
    if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "cannot create network namespaces here";
  }
  void TearDown() override {
    if (!created_) return;
    // Deleting a namespace removes its end of the veth pair, and with it the other end.
    [[maybe_unused]] int ignored =
        std::system(("ip netns del " + a_ + " 2>/dev/null; ip netns del " + b_ + " 2>/dev/null").c_str());
  }
  std::vector<std::string> Netns(const std::string& ns) { return {"ip", "netns", "exec", ns}; }

  std::string a_, b_;
  bool created_ = false;
};

TEST_F(TwoHosts, AllreduceCrossesHostsAndTopologyIsPerHost) {
  Tuttid tuttid({"--bind", "tcp://10.231.0.1:*"}, Netns(a_));
  RankOptions options;
  options.rank_prefix = [this](int r) { return Netns(r < 2 ? a_ : b_); };
  auto ranks = StartRanks(tuttid, "basic", options);
  ExpectTwoByTwoTopology(ranks);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("basic ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

TEST_F(TwoHosts, DisjointSetsAcrossHosts) {
  Tuttid tuttid({"--bind", "tcp://10.231.0.1:*"}, Netns(a_));
  RankOptions options;
  // Sets {0,1} and {2,3} each live on one host; the world spans both.
  options.rank_prefix = [this](int r) { return Netns(r < 2 ? a_ : b_); };
  auto ranks = StartRanks(tuttid, "added_sets", options);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("sets ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

// Pairs within a namespace share memory, pairs across it take TCP: every rank reports the backend
// of every pair through the stats call, after allreduces that connect them all.
TEST_F(TwoHosts, SharedMemoryWithinAHostAndTcpAcrossHosts) {
  Tuttid tuttid({"--bind", "tcp://10.231.0.1:*"}, Netns(a_));
  RankOptions options;
  options.rank_prefix = [this](int r) { return Netns(r < 2 ? a_ : b_); };
  auto ranks = StartRanks(tuttid, "transport", options);
  for (int r = 0; r < 4; ++r) {
    for (int peer = 0; peer < 4; ++peer) {
      if (peer == r) continue;
      auto line = ranks[r]->ReadUntil("link " + std::to_string(peer) + " ", In(240));
      ASSERT_TRUE(line) << ranks[r]->transcript();
      const std::string want = (r < 2) == (peer < 2) ? "shm 1 " : "tcp 1 ";
      EXPECT_EQ(line->substr(0, want.size()), want) << "rank " << r << " peer " << peer;
    }
    EXPECT_TRUE(ranks[r]->ReadUntil("transport ok", In(60))) << ranks[r]->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST_F(TwoHosts, SharedMemoryOnlyIsRefusedAcrossHosts) {
  Tuttid tuttid({"--bind", "tcp://10.231.0.1:*"}, Netns(a_));
  RankOptions options;
  options.rank_prefix = [this](int r) { return Netns(r < 2 ? a_ : b_); };
  options.env["TUTTI_TRANSPORT"] = "shm";
  auto ranks = StartRanks(tuttid, "init_error", options);
  for (int r = 0; r < 4; ++r) {
    auto line = ranks[r]->ReadUntil("init ", In(60));
    ASSERT_TRUE(line) << ranks[r]->transcript();
    const std::string want = "-1 TUTTI_TRANSPORT=shm, but rank " + std::to_string(r < 2 ? 2 : 0) +
                             " is on another host (";
    EXPECT_EQ(line->substr(0, want.size()), want) << *line;
    EXPECT_NE(line->find("): use auto or tcp"), std::string::npos) << *line;
  }
  ExpectAllSucceed(ranks);
}

}  // namespace
}  // namespace tutti::testing
