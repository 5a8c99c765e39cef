// The hierarchical collectives on emulated hosts: H network namespaces ("hosts"), each with its
// own veth into one bridge in the test's namespace, two ranks in each (consecutive ranks share a
// host), tuttid on host 0. Real host identities (the namespaces differ), not TUTTI_HOST_ID.
// Checks exact results below and above the threshold, fused tensors, the hierarchical allgather
// (alone and fused), reducescatter and broadcast (from every root), bitwise-identical averages
// on every rank, and, through tutti_get_peer_stats, that the ranks talked along the hierarchy
// (or along the flat ring with TUTTI_HIERARCHICAL=0). Needs root and iproute2; skipped otherwise.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

constexpr int kPerHost = 2;

class EmulatedHosts : public ::testing::Test {
 protected:
  // Namespaces tutti-h<i>-<pid> at 10.232.0.<i + 1>, veths th<i>n<pid> (inside) and th<i>r<pid>
  // (on the bridge), bridge tbr<pid>: interface names stay within 15 characters.
  void Create(int hosts) {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    const std::string id = std::to_string(getpid());
    bridge_ = "tbr" + id;
    std::string script = "set -e; ip link add " + bridge_ + " type bridge; ip link set " + bridge_ + " up";
    created_ = true;
    for (int h = 0; h < hosts; ++h) {
      const std::string ns = "tutti-h" + std::to_string(h) + "-" + id;
      const std::string inner = "th" + std::to_string(h) + "n" + id, outer = "th" + std::to_string(h) + "r" + id;
      namespaces_.push_back(ns);
      script += "; ip netns add " + ns + "; ip link add " + outer + " type veth peer name " + inner +
                "; ip link set " + inner + " netns " + ns + "; ip link set " + outer + " master " +
                bridge_ + "; ip link set " + outer + " up; ip -n " + ns + " addr add 10.232.0." +
                std::to_string(h + 1) + "/24 dev " + inner + "; ip -n " + ns + " link set " + inner +
                " up; ip -n " + ns + " link set lo up";
    }
    if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "cannot create network namespaces and a bridge here";
  }
  void TearDown() override {
    if (!created_) return;
    std::string script = "ip link del " + bridge_ + " 2>/dev/null";
    // Deleting a namespace removes its veth end, and with it the one on the bridge.
    for (const auto& ns : namespaces_) script += "; ip netns del " + ns + " 2>/dev/null";
    [[maybe_unused]] int ignored = std::system(script.c_str());
  }
  std::vector<std::string> Netns(int host) { return {"ip", "netns", "exec", namespaces_[host]}; }

  // Runs the "hierarchical" scenario on every host and checks what it prints. `hierarchical`:
  // whether the traffic must follow the hierarchy (true) or the flat ring.
  void Run(int hosts, const std::string& mode, bool hierarchical) {
    Create(hosts);
    if (IsSkipped()) return;
    const int n = hosts * kPerHost;
    Tuttid tuttid({"--bind", "tcp://10.232.0.1:*"}, Netns(0));
    RankOptions options;
    options.size = n;
    options.rank_prefix = [this](int r) { return Netns(r / kPerHost); };
    options.env["TUTTI_HIERARCHICAL"] = mode;
    auto ranks = StartRanks(tuttid, "hierarchical", options);
    std::map<std::string, std::set<std::string>> hashes;
    for (int r = 0; r < n; ++r) {
      // Who r talks to: its host's ring neighbours and its local index on the next and previous
      // hosts, or its neighbours on the flat ring of all n.
      std::set<int> expected;
      const int host = r / kPerHost, local = r % kPerHost;
      if (hierarchical) {
        expected = {host * kPerHost + (local + 1) % kPerHost,
                    host * kPerHost + (local + kPerHost - 1) % kPerHost,
                    (host + 1) % hosts * kPerHost + local,
                    (host + hosts - 1) % hosts * kPerHost + local};
      } else {
        expected = {(r + 1) % n, (r + n - 1) % n};
      }
      for (int peer = 0; peer < n; ++peer) {
        if (peer == r) continue;
        auto line = ranks[r]->ReadUntil("traffic " + std::to_string(peer) + " ", In(240));
        ASSERT_TRUE(line) << ranks[r]->transcript();
        const bool talked = *line != "0 0";
        EXPECT_EQ(talked, expected.count(peer) == 1)
            << "rank " << r << " and rank " << peer << ": " << *line;
      }
      ASSERT_TRUE(ranks[r]->ReadUntil("exact ok", In(240))) << ranks[r]->transcript();
      ASSERT_TRUE(ranks[r]->ReadUntil("fused ok", In(120))) << ranks[r]->transcript();
      ASSERT_TRUE(ranks[r]->ReadUntil("others ok", In(240))) << ranks[r]->transcript();
      for (int i = 0; i < 4; ++i) {
        auto line = ranks[r]->ReadUntil("hash ", In(120));
        ASSERT_TRUE(line) << ranks[r]->transcript();
        const auto space = line->find(' ');
        hashes[line->substr(0, space)].insert(line->substr(space + 1));
      }
    }
    ExpectAllSucceed(ranks);
    ASSERT_EQ(hashes.size(), 4u);
    for (const auto& [dtype, distinct] : hashes)
      EXPECT_EQ(distinct.size(), 1u) << dtype << " results differ between ranks";
  }

  std::string bridge_;
  std::vector<std::string> namespaces_;
  bool created_ = false;
};

TEST_F(EmulatedHosts, HierarchicalAllreduceOnTwoHostsOfTwo) { Run(2, "auto", true); }
TEST_F(EmulatedHosts, HierarchicalAllreduceOnFourHostsOfTwo) { Run(4, "auto", true); }
TEST_F(EmulatedHosts, FlatRingWhenHierarchyIsOff) { Run(2, "0", false); }

}  // namespace
}  // namespace tutti::testing
