// The hierarchical collectives' choice as a pure unit (client/exec/hierarchical.h): which sets it
// applies to, the size threshold, the modes, and the groups each member computes.
#include <gtest/gtest.h>

#include "client/exec/hierarchical.h"

namespace tutti::client {
namespace {

// Slot s on host hosts[s].
SetTopology Topology(const MemberList& members, std::vector<std::string> hosts,
                     HierarchyMode mode = HierarchyMode::kAuto) {
  return TopologyOf(members, hosts, mode, kDefaultHierarchicalMinBytes);
}

Algorithm Choose(const MemberList& m, const SetTopology& t, size_t bytes) {
  return ChooseAllreduce(m, &t, bytes, DType::kFloat32, ReduceOp::kSum);
}

TEST(HierarchicalChoice, TwoHostsOfTwoAboveTheThresholdOnly) {
  const MemberList m({0, 1, 2, 3});
  const auto t = Topology(m, {"a", "a", "b", "b"});
  EXPECT_EQ(Choose(m, t, 1 << 20), Algorithm::kHierarchical);
  EXPECT_EQ(Choose(m, t, kDefaultHierarchicalMinBytes), Algorithm::kHierarchical);
  EXPECT_EQ(Choose(m, t, kDefaultHierarchicalMinBytes - 4), Algorithm::kRing);
  EXPECT_EQ(Choose(m, t, 4096), Algorithm::kDirect);
}

TEST(HierarchicalChoice, FlatWhereTheShapeDoesNotAllowIt) {
  const MemberList four({0, 1, 2, 3});
  // One host; one rank per host; uneven hosts.
  EXPECT_EQ(Choose(four, Topology(four, {"a", "a", "a", "a"}), 1 << 20), Algorithm::kRing);
  EXPECT_EQ(Choose(four, Topology(four, {"a", "b", "c", "d"}), 1 << 20), Algorithm::kRing);
  EXPECT_EQ(Choose(four, Topology(four, {"a", "a", "a", "b"}), 1 << 20), Algorithm::kRing);
  // Unknown hosts (no peer list) never group.
  EXPECT_EQ(Choose(four, Topology(four, {}), 1 << 20), Algorithm::kRing);
  EXPECT_EQ(ChooseAllreduce(four, nullptr, 1 << 20, DType::kFloat32, ReduceOp::kSum),
            Algorithm::kRing);
}

TEST(HierarchicalChoice, ModesOverrideTheSizeButNotTheShape) {
  const MemberList m({0, 1, 2, 3});
  EXPECT_EQ(Choose(m, Topology(m, {"a", "a", "b", "b"}, HierarchyMode::kOff), 1 << 20),
            Algorithm::kRing);
  EXPECT_EQ(Choose(m, Topology(m, {"a", "a", "b", "b"}, HierarchyMode::kOn), 64),
            Algorithm::kHierarchical);
  EXPECT_EQ(Choose(m, Topology(m, {"a", "b", "c", "d"}, HierarchyMode::kOn), 1 << 20),
            Algorithm::kRing);
}

TEST(HierarchicalChoice, TheOtherCollectivesFollowTheSameRule) {
  const MemberList m({0, 1, 2, 3});
  const auto two = Topology(m, {"a", "a", "b", "b"}), uneven = Topology(m, {"a", "a", "a", "b"});
  const size_t big = 1 << 20, small = kDefaultHierarchicalMinBytes - 1;
  EXPECT_EQ(ChooseAllgather(m, &two, big), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseAllgather(m, &two, small), Algorithm::kRing);
  EXPECT_EQ(ChooseAllgather(m, &uneven, big), Algorithm::kRing);
  EXPECT_EQ(ChooseReducescatter(m, &two, big), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseReducescatter(m, &two, small), Algorithm::kRing);
  EXPECT_EQ(ChooseBroadcast(m, &two, big), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseBroadcast(m, &two, small), Algorithm::kTree);
  EXPECT_EQ(ChooseBroadcast(m, nullptr, big), Algorithm::kTree);
  EXPECT_STREQ(AlgorithmName(Algorithm::kTree), "tree");
}

TEST(HierarchicalChoice, EveryMemberOfASubsetAgreesAndFindsItsGroups) {
  // World of 8 on hosts a a b b c c d d; the set {0, ..., 5} spans hosts a, b and c with two
  // members each.
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "c", "c", "d", "d"};
  const MemberList m({0, 1, 2, 3, 4, 5});
  const auto t = Topology(m, hosts);
  for (int32_t self : m) {
    EXPECT_EQ(Choose(m, t, 1 << 20), Algorithm::kHierarchical);
    const HostGroups g = GroupByHost(m, t, self);
    ASSERT_TRUE(g.uniform);
    EXPECT_EQ(g.hosts, 3u);
    EXPECT_EQ(g.per_host, 2u);
    EXPECT_EQ(g.local.ranks(), (std::vector<int32_t>{self / 2 * 2, self / 2 * 2 + 1}));
    EXPECT_EQ(g.cross.ranks(), (std::vector<int32_t>{self % 2, 2 + self % 2, 4 + self % 2}));
    EXPECT_EQ(g.host_positions, (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}, {4, 5}}));
  }
}

}  // namespace
}  // namespace tutti::client
