// LeaderLease against a real etcd: one leader per group, terms that only grow, fencing that
// stops a leader before its lease can expire, and what losing etcd means for leader and standby.
#include "server/ha/leader_lease.h"

#include <gtest/gtest.h>

#include "ha/etcd_process.h"

namespace tutti::server::ha {
namespace {

using testing::EtcdProcess;

LeaderLeaseOptions Options(const EtcdProcess& etcd, const std::string& endpoint,
                           int64_t ttl_s = 2) {
  LeaderLeaseOptions options;
  options.etcd = etcd.endpoint();
  options.group = "g";
  options.endpoint = endpoint;
  options.ttl_s = ttl_s;
  options.margin = std::chrono::milliseconds(500);
  options.etcd_timeout = std::chrono::milliseconds(2000);
  return options;
}

// Campaigns until `lease` wins or `seconds` pass; the holder it saw last in *leader.
bool WinWithin(LeaderLease& lease, int seconds, std::string* leader) {
  const auto deadline = testing::In(seconds);
  while (testing::Clock::now() < deadline) {
    bool won = false;
    if (lease.Campaign(&won, leader).ok() && won) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the campaign's own pace
  }
  return false;
}

TEST(LeaderLease, OneLeaderPerGroupAndTheStandbyNamesIt) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  LeaderLease a(Options(etcd, "tcp://a:1")), b(Options(etcd, "tcp://b:2"));
  bool won = false;
  std::string leader;
  ASSERT_TRUE(a.Campaign(&won, &leader).ok());
  EXPECT_TRUE(won);
  EXPECT_EQ(leader, "tcp://a:1");
  EXPECT_EQ(a.term(), 1u);
  EXPECT_TRUE(a.leading());
  EXPECT_TRUE(a.MayRelease(testing::Clock::now()));
  ASSERT_TRUE(b.Campaign(&won, &leader).ok());
  EXPECT_FALSE(won);
  EXPECT_EQ(leader, "tcp://a:1");
  EXPECT_FALSE(b.leading());
  EXPECT_FALSE(b.MayRelease(testing::Clock::now()));
  ASSERT_TRUE(b.CurrentLeader(&leader).ok());
  EXPECT_EQ(leader, "tcp://a:1");
  // A campaign of the leader itself keeps what it has.
  ASSERT_TRUE(a.Campaign(&won, &leader).ok());
  EXPECT_TRUE(won);
}

TEST(LeaderLease, AResigningLeaderHandsOverAtOnceWithAHigherTerm) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  LeaderLease a(Options(etcd, "tcp://a:1")), b(Options(etcd, "tcp://b:2"));
  std::string leader;
  ASSERT_TRUE(WinWithin(a, 10, &leader));
  bool won = false;
  ASSERT_TRUE(b.Campaign(&won, &leader).ok());
  ASSERT_FALSE(won);
  ASSERT_TRUE(a.Resign().ok());
  EXPECT_FALSE(a.MayRelease(testing::Clock::now()));
  ASSERT_TRUE(b.Campaign(&won, &leader).ok());
  EXPECT_TRUE(won);
  EXPECT_EQ(leader, "tcp://b:2");
  EXPECT_EQ(b.term(), 2u);
}

TEST(LeaderLease, ALeaderThatStopsRenewingIsFencedBeforeAStandbyCanWin) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  LeaderLease a(Options(etcd, "tcp://a:1")), b(Options(etcd, "tcp://b:2"));
  std::string leader;
  ASSERT_TRUE(WinWithin(a, 10, &leader));
  // Renewals keep it leading past its TTL.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.Renew().ok());
    EXPECT_TRUE(a.MayRelease(testing::Clock::now()));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the lease's own clock
  }
  // a freezes (no renewals). b wins only after a's lease expired in etcd; a's fence had run
  // out before b's campaign could succeed.
  const auto frozen = testing::Clock::now();
  ASSERT_TRUE(WinWithin(b, 30, &leader));
  const auto b_won = testing::Clock::now();
  EXPECT_GE(b_won - frozen, std::chrono::milliseconds(1000));  // ttl 2 s minus one renewal gap
  EXPECT_LT(a.fenced_at(), b_won);
  EXPECT_FALSE(a.MayRelease(b_won));
  EXPECT_EQ(b.term(), 2u);
  // a wakes: its renewal finds the lease expired, and it no longer leads.
  const Status renewed = a.Renew();
  EXPECT_EQ(renewed.code(), Code::kCoordinatorLost);
  EXPECT_EQ(renewed.message(), "the HA lease expired in etcd: this tuttid no longer leads group 'g'");
  EXPECT_FALSE(a.leading());
}

TEST(LeaderLease, WithoutEtcdTheLeaderFencesItselfAndNoStandbyCanWin) {
  TUTTI_REQUIRE_ETCD();
  auto etcd = std::make_unique<EtcdProcess>();
  ASSERT_TRUE(etcd->ready()) << etcd->transcript();
  LeaderLease a(Options(*etcd, "tcp://a:1")), b(Options(*etcd, "tcp://b:2"));
  std::string leader;
  ASSERT_TRUE(WinWithin(a, 10, &leader));
  etcd.reset();  // killed with SIGKILL
  const auto lost = testing::Clock::now();
  EXPECT_EQ(a.Renew().code(), Code::kTimeout);
  // Still leading as far as it knows, but it stops releasing at its fence: within the TTL.
  EXPECT_TRUE(a.leading());
  EXPECT_LE(a.fenced_at(), lost + std::chrono::seconds(2));
  bool won = true;
  EXPECT_EQ(b.Campaign(&won, &leader).code(), Code::kTimeout);
  EXPECT_FALSE(won);
  EXPECT_FALSE(b.leading());
}

}  // namespace
}  // namespace tutti::server::ha
