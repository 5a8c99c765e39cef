// The data-plane backend table (transport/backend.h) and route planning
// (transport/route_planner.h): the built-in backends' names, links and preferences and
// FindBackend by either; CheckTransportName with its exact message for an unknown name; and
// PlanRoutes under auto (same host: shm, another host: tcp, this rank: none), forced tcp, and
// forced shm with a peer on another host (the exact error naming it); the MPI backend, never
// chosen by auto, and refused outside MPI mode; the ibverbs backend, ranked between TCP and
// shared memory, and, where no RDMA device exists, refused by its real discovery with the reason
// while auto plans as before.
#include "transport/route_planner.h"
#include "transport/message_pipe.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/client_test_support.h"
#include "rdma/no_device.h"

namespace tutti::transport {
namespace {

using namespace tutti::testing;

// Ranks 0 and 1 on host "a", rank 2 on host "b".
const std::vector<PeerAddress> kPeers = {
    {0, "10.0.0.1:4000", "a"}, {1, "10.0.0.1:4001", "a"}, {2, "10.0.0.2:4000", "b"}};

std::vector<Link> Links(const std::vector<PeerRoute>& routes) {
  std::vector<Link> links;
  for (const auto& route : routes) links.push_back(route.link);
  return links;
}

TEST(BackendTable, ListsTcpThenShmThenMpiThenIbverbs) {
  const auto& backends = Backends();
  ASSERT_GE(backends.size(), 4u);
  EXPECT_STREQ(backends[3]->name(), "ibverbs");
  EXPECT_EQ(backends[3]->link(), Link::kIbverbs);
  EXPECT_STREQ(backends[0]->name(), "tcp");
  EXPECT_EQ(backends[0]->link(), Link::kTcp);
  EXPECT_STREQ(backends[1]->name(), "shm");
  EXPECT_EQ(backends[1]->link(), Link::kShm);
  EXPECT_STREQ(backends[2]->name(), "mpi");
  EXPECT_EQ(backends[2]->link(), Link::kMpi);
}

TEST(BackendTable, MpiNeedsTheCarrierAndIsNeverPreferred) {
  const Backend* mpi = FindBackend(Link::kMpi);
  ASSERT_NE(mpi, nullptr);
  EXPECT_TRUE(mpi->needs_carrier());
  EXPECT_FALSE(FindBackend(Link::kTcp)->needs_carrier());
  EXPECT_FALSE(FindBackend(Link::kShm)->needs_carrier());
  EXPECT_LT(mpi->preference(), FindBackend(Link::kTcp)->preference());
  EXPECT_FALSE(mpi->relays_in_place());
}

TEST(BackendTable, IbverbsWinsOverTcpAndLosesToSharedMemory) {
  const Backend* ibverbs = FindBackend("ibverbs");
  ASSERT_NE(ibverbs, nullptr);
  EXPECT_EQ(FindBackend(Link::kIbverbs), ibverbs);
  EXPECT_GT(ibverbs->preference(), FindBackend(Link::kTcp)->preference());
  EXPECT_LT(ibverbs->preference(), FindBackend(Link::kShm)->preference());
  EXPECT_FALSE(ibverbs->relays_in_place());
  EXPECT_FALSE(ibverbs->needs_carrier());
  std::string why;
  EXPECT_TRUE(ibverbs->CanReach(kPeers[0], kPeers[2], &why));
}

// Through the real discovery (rdma-core's device list), which is what a machine with a device
// takes too; there it finds one and this test skips in favour of tests/rdma.
TEST(CheckForcedTransport, IbverbsWithoutAnRdmaDeviceIsRefusedWithTheReason) {
  if (const std::string device = tutti::testing::ListedRdmaDevice(); !device.empty())
    GTEST_SKIP() << "an RDMA device exists (" << device << "): tests/rdma runs instead";
  const std::string reason = tutti::testing::NoRdmaDeviceReason();
  std::string why;
  EXPECT_FALSE(FindBackend("ibverbs")->Viable(&why));
  EXPECT_EQ(why, reason);
  EXPECT_TRUE(IsStatus(CheckForcedTransport("ibverbs"), Code::kInvalidArgument,
                       "TUTTI_TRANSPORT=ibverbs, but " + reason));
  std::vector<PeerRoute> routes;
  EXPECT_TRUE(IsStatus(PlanRoutes(0, "a", kPeers, "ibverbs", &routes), Code::kInvalidArgument,
                       "TUTTI_TRANSPORT=ibverbs, but " + reason));
  // auto, tcp and shm are unaffected: no device is looked for on their behalf.
  EXPECT_TRUE(IsOk(CheckForcedTransport("auto")));
  EXPECT_TRUE(IsOk(CheckForcedTransport("tcp")));
  EXPECT_TRUE(IsOk(CheckForcedTransport("shm")));
  EXPECT_TRUE(IsStatus(CheckForcedTransport("ib"), Code::kInvalidArgument,
                       "unknown transport 'ib' (TUTTI_TRANSPORT): use auto, tcp, shm, mpi or "
                       "ibverbs"));
}

TEST(PlanRoutes, AutoAcrossHostsWithoutAnRdmaDeviceStaysOnTcp) {
  if (const std::string device = tutti::testing::ListedRdmaDevice(); !device.empty())
    GTEST_SKIP() << "an RDMA device exists (" << device << "): tests/rdma runs instead";
  std::vector<PeerRoute> routes;
  ASSERT_TRUE(IsOk(PlanRoutes(0, "a", kPeers, "auto", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kNone, Link::kShm, Link::kTcp}));
}

// This test program loads no libtutti_mpi: outside MPI mode, whatever the process.
TEST(OpenCarrier, MpiOutsideMpiModeIsRefusedNamingTheRemedy) {
  std::unique_ptr<MessageCarrier> carrier;
  EXPECT_TRUE(IsStatus(OpenCarrier("mpi", &carrier), Code::kInvalidArgument,
                       "TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)"));
  EXPECT_EQ(carrier, nullptr);
  EXPECT_TRUE(IsOk(OpenCarrier("tcp", &carrier)));
  EXPECT_TRUE(IsOk(OpenCarrier("auto", &carrier)));
  EXPECT_EQ(carrier, nullptr);
}

TEST(PlanRoutes, ForcedMpiCarriesEveryPair) {
  std::vector<PeerRoute> routes;
  ASSERT_TRUE(IsOk(PlanRoutes(1, "a", kPeers, "mpi", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kMpi, Link::kNone, Link::kMpi}));
}

TEST(BackendTable, SharedMemoryIsPreferredAndAloneRelaysInPlace) {
  const Backend* tcp = FindBackend(Link::kTcp);
  const Backend* shm = FindBackend(Link::kShm);
  ASSERT_NE(tcp, nullptr);
  ASSERT_NE(shm, nullptr);
  EXPECT_GT(shm->preference(), tcp->preference());
  EXPECT_TRUE(shm->relays_in_place());
  EXPECT_FALSE(tcp->relays_in_place());
  std::string why;
  EXPECT_TRUE(tcp->Viable(&why));
  EXPECT_TRUE(shm->Viable(&why));
}

TEST(BackendTable, FindsBackendsByNameAndLinkAndNothingElse) {
  EXPECT_EQ(FindBackend("tcp"), FindBackend(Link::kTcp));
  EXPECT_EQ(FindBackend("shm"), FindBackend(Link::kShm));
  EXPECT_EQ(FindBackend("mpi"), FindBackend(Link::kMpi));
  EXPECT_EQ(FindBackend("auto"), nullptr);
  EXPECT_EQ(FindBackend("TCP"), nullptr);
  EXPECT_EQ(FindBackend(""), nullptr);
  EXPECT_EQ(FindBackend(Link::kNone), nullptr);
}

TEST(BackendTable, SharedMemoryReachesTheSameHostOnlyAndSaysWhy) {
  const Backend* shm = FindBackend(Link::kShm);
  ASSERT_NE(shm, nullptr);
  std::string why;
  EXPECT_TRUE(shm->CanReach(kPeers[0], kPeers[1], &why));
  EXPECT_FALSE(shm->CanReach(kPeers[0], kPeers[2], &why));
  EXPECT_EQ(why, "rank 2 is on another host (b)");
  EXPECT_TRUE(FindBackend(Link::kTcp)->CanReach(kPeers[0], kPeers[2], &why));
}

TEST(CheckTransportName, AcceptsAutoAndEveryBackendsName) {
  EXPECT_TRUE(IsOk(CheckTransportName("auto")));
  EXPECT_TRUE(IsOk(CheckTransportName("tcp")));
  EXPECT_TRUE(IsOk(CheckTransportName("shm")));
  EXPECT_TRUE(IsOk(CheckTransportName("mpi")));
}

TEST(CheckTransportName, UnknownNameIsRefusedWithTheChoices) {
  EXPECT_TRUE(IsStatus(CheckTransportName("rdma"), Code::kInvalidArgument,
                       "unknown transport 'rdma' (TUTTI_TRANSPORT): use auto, tcp, shm, mpi or ibverbs"));
  EXPECT_TRUE(IsStatus(CheckTransportName(""), Code::kInvalidArgument,
                       "unknown transport '' (TUTTI_TRANSPORT): use auto, tcp, shm, mpi or ibverbs"));
}

TEST(PlanRoutes, AutoTakesSharedMemoryOnTheHostAndTcpAcrossHosts) {
  std::vector<PeerRoute> routes;
  ASSERT_TRUE(IsOk(PlanRoutes(0, "a", kPeers, "auto", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kNone, Link::kShm, Link::kTcp}));
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].endpoint, "10.0.0.1:4000");
  EXPECT_EQ(routes[1].endpoint, "10.0.0.1:4001");
  EXPECT_EQ(routes[2].endpoint, "10.0.0.2:4000");
  ASSERT_TRUE(IsOk(PlanRoutes(2, "b", kPeers, "auto", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kTcp, Link::kTcp, Link::kNone}));
}

TEST(PlanRoutes, ReplacesWhatTheRoutesHeld) {
  std::vector<PeerRoute> routes = {{"stale", Link::kShm}, {"stale", Link::kShm},
                                   {"stale", Link::kShm}, {"stale", Link::kShm}};
  ASSERT_TRUE(IsOk(PlanRoutes(1, "a", kPeers, "auto", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kShm, Link::kNone, Link::kTcp}));
}

TEST(PlanRoutes, ForcedTcpCarriesEveryPair) {
  std::vector<PeerRoute> routes;
  ASSERT_TRUE(IsOk(PlanRoutes(1, "a", kPeers, "tcp", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kTcp, Link::kNone, Link::kTcp}));
}

TEST(PlanRoutes, ForcedSharedMemoryOnOneHostCarriesEveryPair) {
  const std::vector<PeerAddress> local = {kPeers[0], kPeers[1]};
  std::vector<PeerRoute> routes;
  ASSERT_TRUE(IsOk(PlanRoutes(0, "a", local, "shm", &routes)));
  EXPECT_EQ(Links(routes), (std::vector<Link>{Link::kNone, Link::kShm}));
}

TEST(PlanRoutes, ForcedSharedMemoryWithAPeerOnAnotherHostIsAnErrorNamingIt) {
  std::vector<PeerRoute> routes;
  EXPECT_TRUE(IsStatus(PlanRoutes(0, "a", kPeers, "shm", &routes), Code::kInvalidArgument,
                       "TUTTI_TRANSPORT=shm, but rank 2 is on another host (b): use auto or tcp"));
}

TEST(PlanRoutes, UnknownTransportIsRefusedLikeCheckTransportName) {
  std::vector<PeerRoute> routes;
  EXPECT_TRUE(IsStatus(PlanRoutes(0, "a", kPeers, "ib", &routes), Code::kInvalidArgument,
                       "unknown transport 'ib' (TUTTI_TRANSPORT): use auto, tcp, shm, mpi or ibverbs"));
}

}  // namespace
}  // namespace tutti::transport
