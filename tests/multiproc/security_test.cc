// CURVE on tuttid's control plane: keys generated here, a real tuttid requiring them, real ranks.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <zmq.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

struct KeyPair {
  std::string public_key, secret_key;
};

KeyPair NewKeyPair() {
  char public_key[41], secret_key[41];
  EXPECT_EQ(zmq_curve_keypair(public_key, secret_key), 0) << "libzmq without CURVE";
  return {public_key, secret_key};
}

// A directory of key files for one tuttid, removed with the object.
class CurveSetup {
 public:
  explicit CurveSetup(const std::string& job, int ranks) : job_(job) {
    char dir[] = "/tmp/tutti-curve-XXXXXX";
    dir_ = mkdtemp(dir);
    server_ = NewKeyPair();
    for (int r = 0; r < ranks; ++r) clients_.push_back(NewKeyPair());
    std::ofstream(dir_ + "/server.toml") << "secret_key = \"" << server_.secret_key << "\"\n";
    std::ofstream clients(dir_ + "/clients.toml");
    clients << "[jobs." << job << "]\nranks = [";
    for (int r = 0; r < ranks; ++r) clients << (r ? ", " : "") << '"' << clients_[r].public_key << '"';
    clients << "]\n";
  }
  ~CurveSetup() {
    std::remove((dir_ + "/server.toml").c_str());
    std::remove((dir_ + "/clients.toml").c_str());
    rmdir(dir_.c_str());
  }
  std::vector<std::string> TuttidArgs() const {
    return {"--curve-secret-key-file", dir_ + "/server.toml", "--curve-clients",
            dir_ + "/clients.toml"};
  }
  // The environment of a rank using `key`.
  std::map<std::string, std::string> Env(const KeyPair& key) const {
    return {{"TUTTI_CURVE_SERVER_KEY", server_.public_key},
            {"TUTTI_CURVE_PUBLIC_KEY", key.public_key},
            {"TUTTI_CURVE_SECRET_KEY", key.secret_key}};
  }
  const KeyPair& client(int rank) const { return clients_[rank]; }
  const std::string& job() const { return job_; }

 private:
  std::string job_, dir_;
  KeyPair server_;
  std::vector<KeyPair> clients_;
};

TEST(Curve, RanksWithListedKeysRunAJob) {
  CurveSetup curve(UniqueJobId(), 3);
  Tuttid tuttid(curve.TuttidArgs());
  RankOptions options;
  options.job = curve.job();
  options.size = 3;
  options.rank_env = [&](int rank) { return curve.Env(curve.client(rank)); };
  auto ranks = StartRanks(tuttid, "basic", options);
  ExpectAllSucceed(ranks);
}

TEST(Curve, AKeyRegisteringAsAnotherRankIsRefused) {
  CurveSetup curve(UniqueJobId(), 3);
  Tuttid tuttid(curve.TuttidArgs());
  RankOptions options;
  options.job = curve.job();
  options.size = 3;
  options.ranks = {2};
  options.env = curve.Env(curve.client(1));  // rank 1's key, registering as rank 2
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ",
                    "-12 authentication failed: this rank's CURVE key is not listed for rank 2 of "
                    "job '" + curve.job() + "' in tuttid's client keys (it belongs to rank 1 of "
                    "job '" + curve.job() + "')");
  ExpectAllSucceed(ranks);
}

TEST(Curve, UnlistedKeysAndMissingKeysAreRefusedAtTheHandshake) {
  CurveSetup curve(UniqueJobId(), 2);
  Tuttid tuttid(curve.TuttidArgs());
  RankOptions options;
  options.job = curve.job();
  options.size = 2;
  options.ranks = {0};
  options.env = curve.Env(NewKeyPair());
  auto unlisted = StartRanks(tuttid, "init_error", options);
  options.env.clear();
  options.ranks = {1};
  auto without = StartRanks(tuttid, "init_error", options);
  // Refused at once, not at the rendezvous deadline.
  ExpectLineOnEvery(unlisted, "init ",
                    "-12 authentication failed: tuttid at " + tuttid.endpoint() +
                        " refused this rank's CURVE key (ZAP status 400): is "
                        "TUTTI_CURVE_PUBLIC_KEY listed in tuttid's --curve-clients?",
                    30);
  auto line = without[0]->ReadUntil("init ", In(30));
  ASSERT_TRUE(line) << without[0]->transcript();
  EXPECT_EQ(line->rfind("-12 authentication failed: the handshake with tuttid at " +
                            tuttid.endpoint() + " failed (ZeroMQ handshake error ",
                        0),
            0u)
      << *line;
  EXPECT_NE(line->find("): tuttid probably requires CURVE; set TUTTI_CURVE_SERVER_KEY, "
                       "TUTTI_CURVE_PUBLIC_KEY and TUTTI_CURVE_SECRET_KEY"),
            std::string::npos)
      << *line;
  ExpectAllSucceed(unlisted);
  ExpectAllSucceed(without);
}

TEST(Curve, HalfAConfigurationKeepsTuttidFromStarting) {
  CurveSetup curve(UniqueJobId(), 1);
  const auto args = curve.TuttidArgs();
  Process tuttid({TUTTID_PATH, "--bind", "tcp://127.0.0.1:*", args[0], args[1]}, {});
  EXPECT_TRUE(tuttid.ReadUntilContaining("CURVE needs both --curve-secret-key-file and "
                                         "--curve-clients (only --curve-secret-key-file is set)",
                                         In(30)))
      << tuttid.transcript();
  auto status = tuttid.Wait(In(30));
  ASSERT_TRUE(status) << tuttid.transcript();
  EXPECT_EQ(*status, 2);
}

TEST(Curve, IncompleteRankKeysAreRefusedByName) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env = {{"TUTTI_CURVE_SERVER_KEY", NewKeyPair().public_key}};
  auto ranks = StartRanks(tuttid, "init_error", options);
  ExpectLineOnEvery(ranks, "init ",
                    "-1 CURVE needs TUTTI_CURVE_SERVER_KEY, TUTTI_CURVE_PUBLIC_KEY and "
                    "TUTTI_CURVE_SECRET_KEY together; only 1 of them are set");
  ExpectAllSucceed(ranks);
}

}  // namespace
}  // namespace tutti::testing
