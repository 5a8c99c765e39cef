// EtcdClient against a real etcd (tests/ha/etcd_process.h): leases, keys and the election's
// compare-and-put, as the HA group of tuttids uses them, and what an unreachable etcd says.
#include "server/ha/etcd_client.h"

#include <gtest/gtest.h>

#include "ha/etcd_process.h"

namespace tutti::server::ha {
namespace {

using testing::EtcdProcess;

constexpr std::chrono::milliseconds kTimeout(10000);

TEST(EtcdClient, PutGetAndDeleteBytesThatAreNotText) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  EtcdClient client(etcd.endpoint(), kTimeout);
  const std::string key = "/tutti/jobs/j\x01", value("a\0b\xff", 4);
  std::optional<KeyValue> found;
  ASSERT_TRUE(client.Get(key, &found).ok());
  EXPECT_FALSE(found.has_value());
  ASSERT_TRUE(client.Put(key, value).ok());
  ASSERT_TRUE(client.Get(key, &found).ok());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->key, key);
  EXPECT_EQ(found->value, value);
  EXPECT_GT(found->mod_revision, 0);
  EXPECT_EQ(found->create_revision, found->mod_revision);
  EXPECT_EQ(found->lease, 0);
  ASSERT_TRUE(client.Put(key, "second").ok());
  ASSERT_TRUE(client.Get(key, &found).ok());
  EXPECT_EQ(found->value, "second");
  EXPECT_GT(found->mod_revision, found->create_revision);
  ASSERT_TRUE(client.Delete(key).ok());
  ASSERT_TRUE(client.Get(key, &found).ok());
  EXPECT_FALSE(found.has_value());
}

TEST(EtcdClient, TheFirstCandidateCreatesTheKeyAndTheSecondReadsTheHolder) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  EtcdClient first(etcd.endpoint(), kTimeout), second(etcd.endpoint(), kTimeout);
  int64_t lease_a = 0, lease_b = 0;
  ASSERT_TRUE(first.Grant(30, &lease_a).ok());
  ASSERT_TRUE(second.Grant(30, &lease_b).ok());
  EXPECT_NE(lease_a, lease_b);
  bool created = false;
  KeyValue current;
  ASSERT_TRUE(first.CreateIfAbsent("/tutti/leader", "tcp://a:1", lease_a, &created, &current).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(current.value, "tcp://a:1");
  EXPECT_EQ(current.lease, lease_a);
  ASSERT_TRUE(
      second.CreateIfAbsent("/tutti/leader", "tcp://b:2", lease_b, &created, &current).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(current.value, "tcp://a:1");  // the holder's
  // The holder's lease revoked: its key goes, and the next candidate wins.
  ASSERT_TRUE(first.Revoke(lease_a).ok());
  ASSERT_TRUE(
      second.CreateIfAbsent("/tutti/leader", "tcp://b:2", lease_b, &created, &current).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(current.value, "tcp://b:2");
}

TEST(EtcdClient, AKeptAliveLeaseLivesAndAnExpiredOneTakesItsKeys) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  EtcdClient client(etcd.endpoint(), kTimeout);
  int64_t lease = 0, ttl = 0;
  ASSERT_TRUE(client.Grant(2, &lease).ok());
  ASSERT_TRUE(client.Put("/tutti/leased", "x", lease).ok());
  // Renewed across more than its TTL: still there.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(client.KeepAlive(lease, &ttl).ok());
    EXPECT_GT(ttl, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the lease's own clock
  }
  std::optional<KeyValue> found;
  ASSERT_TRUE(client.Get("/tutti/leased", &found).ok());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->lease, lease);
  // Left alone, it expires (etcd checks leases every 500 ms; allow a loaded machine time).
  const auto deadline = testing::In(30);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(client.Get("/tutti/leased", &found).ok());
  } while (found.has_value() && testing::Clock::now() < deadline);
  EXPECT_FALSE(found.has_value());
  ASSERT_TRUE(client.KeepAlive(lease, &ttl).ok());
  EXPECT_EQ(ttl, 0);  // expired for good
}

TEST(EtcdClient, AnUnreachableEtcdIsATimeoutNamingIt) {
  const int port = testing::FreePort();  // nobody listens there
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  EtcdClient client(endpoint, std::chrono::milliseconds(300));
  int64_t lease = 0;
  const Status status = client.Grant(5, &lease);
  EXPECT_EQ(status.code(), Code::kTimeout);
  EXPECT_EQ(status.message().rfind("etcd at " + endpoint + " did not answer /v3/lease/grant "
                                   "within 300 ms (",
                                   0),
            0u)
      << status.message();
}

TEST(EtcdClient, AnEtcdThatRefusesACallSaysWhy) {
  TUTTI_REQUIRE_ETCD();
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ready()) << etcd.transcript();
  EtcdClient client(etcd.endpoint(), kTimeout);
  // A key put with a lease etcd never granted.
  const Status status = client.Put("/tutti/x", "y", 12345);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_EQ(status.message(), "etcd at " + etcd.endpoint() +
                                  " refused /v3/kv/put (HTTP 404): etcdserver: requested lease "
                                  "not found")
      << status.message();
}

}  // namespace
}  // namespace tutti::server::ha
