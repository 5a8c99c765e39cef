// Whole jobs over ibverbs on a real RDMA device: real tuttid, real worker processes linking
// libtutti.so, TUTTI_TRANSPORT=ibverbs on every rank, through the adapter's loopback. Every
// allreduce of the transport scenario (every dtype, sizes that take every path) gives bit for bit
// what TCP gives, and every pair is connected over the backend. Skips, reported as skipped, with
// discovery's reason where no usable port exists.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "multiproc/cluster.h"
#include "transport/backend.h"

namespace tutti::testing {
namespace {

struct Run {
  std::map<std::string, std::string> hashes;  // case -> fnv
  std::map<int, std::string> links;           // peer -> "<transport> <connected>"
};

std::vector<Run> RunTransportScenario(int size, const std::string& transport) {
  Tuttid tuttid;
  RankOptions options;
  options.size = size;
  options.env["TUTTI_TRANSPORT"] = transport;
  auto ranks = StartRanks(tuttid, "transport", options);
  std::vector<Run> runs(size);
  for (int r = 0; r < size; ++r)
    while (auto line = ranks[r]->ReadLine(In(240))) {
      std::istringstream in(*line);
      std::string kind;
      in >> kind;
      if (kind == "hash") {
        std::string name, fnv;
        in >> name >> fnv;
        runs[r].hashes[name] = fnv;
      } else if (kind == "link") {
        int peer, connected;
        std::string link;
        in >> peer >> link >> connected;
        runs[r].links[peer] = link + " " + std::to_string(connected);
      } else if (kind == "transport") {
        break;
      }
    }
  ExpectAllSucceed(ranks, 240);
  return runs;
}

TEST(IbverbsJob, EveryAllreduceMatchesTcpBitForBit) {
  std::string why;
  if (!transport::FindBackend("ibverbs")->Viable(&why)) GTEST_SKIP() << why;
  constexpr int kSize = 3;
  const auto tcp = RunTransportScenario(kSize, "tcp");
  const auto ibverbs = RunTransportScenario(kSize, "ibverbs");
  for (int r = 0; r < kSize; ++r) {
    ASSERT_EQ(ibverbs[r].hashes.size(), 40u) << "rank " << r;
    EXPECT_EQ(ibverbs[r].hashes, tcp[r].hashes) << "rank " << r;
    for (int peer = 0; peer < kSize; ++peer) {
      if (peer == r) continue;
      // tutti_transport_t has no ibverbs value until the ABI is bumped (transport/transport.h):
      // the name of Link::kIbverbs is "unknown" until then; "tcp" would mean a fallback.
      EXPECT_EQ(ibverbs[r].links.at(peer), "unknown 1") << "rank " << r << " peer " << peer;
    }
  }
}

}  // namespace
}  // namespace tutti::testing
