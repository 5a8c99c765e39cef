// The data plane's backends across real processes: shared memory and TCP give bitwise-identical
// results, the stats call names the backend of every pair, TUTTI_TRANSPORT is checked (ibverbs
// refused on every rank where no RDMA device exists), and killed ranks leave nothing of tutti in
// /dev/shm. Multi-host selection: netns_test.cc; ibverbs where a device exists: tests/rdma.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <sstream>

#include "multiproc/cluster.h"
#include "rdma/no_device.h"

namespace tutti::testing {
namespace {

struct Transcript {
  std::map<std::string, std::string> hashes;           // case -> fnv
  std::map<int, std::string> links;                    // peer -> "<transport> <connected>"
  std::map<int, std::pair<uint64_t, uint64_t>> bytes;  // peer -> sent, received
  std::string self, unknown;
};

// Runs the "transport" scenario on `size` ranks with TUTTI_TRANSPORT=`transport` (unset if
// empty) and TUTTI_DATA_SECURITY=`security` (unset if empty), and returns each rank's lines.
std::vector<Transcript> RunCases(int size, const std::string& transport,
                                 const std::string& security = "") {
  Tuttid tuttid;
  RankOptions options;
  options.size = size;
  if (!transport.empty()) options.env["TUTTI_TRANSPORT"] = transport;
  if (!security.empty()) options.env["TUTTI_DATA_SECURITY"] = security;
  auto ranks = StartRanks(tuttid, "transport", options);
  std::vector<Transcript> result(size);
  for (int r = 0; r < size; ++r) {
    while (auto line = ranks[r]->ReadLine(In(240))) {
      std::istringstream in(*line);
      std::string kind;
      in >> kind;
      if (kind == "hash") {
        std::string name, fnv;
        in >> name >> fnv;
        result[r].hashes[name] = fnv;
      } else if (kind == "link") {
        int peer, connected;
        std::string link;
        uint64_t sent, received;
        in >> peer >> link >> connected >> sent >> received;
        result[r].links[peer] = link + " " + std::to_string(connected);
        result[r].bytes[peer] = {sent, received};
      } else if (kind == "self") {
        result[r].self = line->substr(5);
      } else if (kind == "unknown") {
        result[r].unknown = line->substr(8);
      } else if (kind == "transport") {
        break;
      }
    }
  }
  ExpectAllSucceed(ranks, 240);
  return result;
}

class Transports : public ::testing::TestWithParam<int> {};

TEST_P(Transports, ShmAndTcpGiveBitwiseIdenticalResults) {
  const int size = GetParam();
  const auto tcp = RunCases(size, "tcp");
  const auto shm = RunCases(size, "shm");
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(tcp[r].hashes.size(), 40u) << "rank " << r;  // 8 dtype cases x 5 sizes
    EXPECT_EQ(tcp[r].hashes, shm[r].hashes) << "rank " << r;
    EXPECT_EQ(tcp[r].hashes, tcp[0].hashes) << "every rank holds the same bits";
    for (int peer = 0; peer < size; ++peer) {
      if (peer == r) continue;
      // Small allreduces exchange with every member, so every pair is connected.
      EXPECT_EQ(tcp[r].links.at(peer), "tcp 1") << "rank " << r << " peer " << peer;
      EXPECT_EQ(shm[r].links.at(peer), "shm 1") << "rank " << r << " peer " << peer;
      EXPECT_GT(shm[r].bytes.at(peer).first, 0u);
      EXPECT_GT(shm[r].bytes.at(peer).second, 0u);
    }
    EXPECT_EQ(shm[r].self,
              "-1 rank " + std::to_string(r) + " is not another member of process set 0");
    EXPECT_EQ(shm[r].unknown.substr(0, 3), "-2 ") << shm[r].unknown;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Transports, ::testing::Values(2, 3, 4));

TEST(Transport, AutoUsesSharedMemoryOnOneHost) {
  const auto runs = RunCases(2, "");
  EXPECT_EQ(runs[0].links.at(1), "shm 1");
  EXPECT_EQ(runs[1].links.at(0), "shm 1");
}

TEST(Transport, UnknownSettingIsRefused) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env["TUTTI_TRANSPORT"] = "carrier-pigeon";
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ",
                    "-1 unknown transport 'carrier-pigeon' (TUTTI_TRANSPORT): use auto, tcp, shm, mpi or "
                    "ibverbs");
  ExpectAllSucceed(ranks);
}

// A real job init on every rank, through the same discovery a machine with a device takes
// (rdma-core's device list): here it finds none, and tutti_init fails with
// TUTTI_ERR_INVALID_ARGUMENT and the reason, before any rank meets tuttid.
TEST(Transport, IbverbsWithoutAnRdmaDeviceIsRefusedOnEveryRankWithTheReason) {
  if (const std::string device = ListedRdmaDevice(); !device.empty())
    GTEST_SKIP() << "an RDMA device exists (" << device << "): tests/rdma runs instead";
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  options.env["TUTTI_TRANSPORT"] = "ibverbs";
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ", "-1 TUTTI_TRANSPORT=ibverbs, but " + NoRdmaDeviceReason());
  ExpectAllSucceed(ranks);
}

TEST(Transport, SettingsThatDifferAcrossRanksAreRefusedOnEveryRank) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  options.rank_env = [](int rank) {
    return std::map<std::string, std::string>{{"TUTTI_TRANSPORT", rank == 2 ? "tcp" : "auto"}};
  };
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ",
                    "-5 transports differ: rank 0 asked for 'auto', rank 2 for 'tcp' (set "
                    "TUTTI_TRANSPORT alike on every rank)");
  ExpectAllSucceed(ranks);
}

// The sealed TCP data plane (docs/security.md) changes how bytes travel, never which: every case
// gives the same bits as plain TCP, under both modes.
TEST(DataSecurity, SealedTcpGivesTheBitsOfPlainTcp) {
  const auto plain = RunCases(3, "tcp");
  for (const std::string security : {"integrity", "encrypt"}) {
    const auto sealed = RunCases(3, "tcp", security);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(sealed[r].hashes.size(), 40u) << security << " rank " << r;
      EXPECT_EQ(sealed[r].hashes, plain[r].hashes) << security << " rank " << r;
      for (int peer = 0; peer < 3; ++peer)
        if (peer != r) EXPECT_EQ(sealed[r].links.at(peer), "tcp 1") << security;
    }
  }
}

TEST(DataSecurity, AnUnknownSettingIsRefusedOnEveryRank) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env["TUTTI_DATA_SECURITY"] = "tls";
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ", "-1 TUTTI_DATA_SECURITY is 'tls': use off, integrity or encrypt");
  ExpectAllSucceed(ranks);
}

TEST(DataSecurity, SettingsThatDifferAcrossRanksAreRefusedOnEveryRank) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  options.rank_env = [](int rank) {
    return std::map<std::string, std::string>{
        {"TUTTI_DATA_SECURITY", rank == 2 ? "integrity" : "encrypt"}};
  };
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ",
                    "-5 data-plane security differs: rank 0 asked for 'encrypt', rank 2 for "
                    "'integrity' (set TUTTI_DATA_SECURITY alike on every rank)");
  ExpectAllSucceed(ranks);
}

// Entries of /dev/shm whose name mentions tutti.
std::set<std::string> TuttiInDevShm() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir))
      if (std::string(entry->d_name).find("tutti") != std::string::npos)
        names.insert(entry->d_name);
    closedir(dir);
  }
  return names;
}

// Kills every rank with SIGKILL once each printed `line`.
void KillAllAfter(std::vector<std::unique_ptr<Process>>& ranks, const std::string& line) {
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil(line, In(120))) << rank->transcript();
  for (auto& rank : ranks) rank->Signal(SIGKILL);
  for (auto& rank : ranks) EXPECT_TRUE(rank->Wait(In(60)).has_value());
}

TEST(ShmCleanup, KilledRanksLeaveNothingInDevShm) {
  const auto before = TuttiInDevShm();
  EXPECT_TRUE(before.empty()) << *before.begin();
  Tuttid tuttid;
  RankOptions options;
  options.size = 4;
  options.env["TUTTI_TRANSPORT"] = "shm";
  {  // during setup: the first allreduce is connecting the shared-memory pairs
    auto ranks = StartRanks(tuttid, "shm_loop", options);
    KillAllAfter(ranks, "joined");
  }
  {  // during a 64 MiB allreduce
    auto ranks = StartRanks(tuttid, "shm_loop", options);
    KillAllAfter(ranks, "looping");
  }
  const auto after = TuttiInDevShm();
  EXPECT_TRUE(after.empty()) << *after.begin();
}

}  // namespace
}  // namespace tutti::testing
