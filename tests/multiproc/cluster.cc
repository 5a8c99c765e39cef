#include "multiproc/cluster.h"

#include <cstdlib>

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include <gtest/gtest.h>

namespace tutti::testing {

Tuttid::Tuttid(std::vector<std::string> extra_args, std::vector<std::string> prefix) {
  std::vector<std::string> argv = prefix;
  // TUTTID: a tuttid elsewhere than this build's (tests/gpu/device_check.sh on a GPU machine).
  const char* program = std::getenv("TUTTID") ? std::getenv("TUTTID") : TUTTID_PATH;
  for (const char* arg : {program, "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"})
    argv.push_back(arg);
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process_ = std::make_unique<Process>(argv, std::map<std::string, std::string>{});
  auto endpoint = process_->ReadUntil("tuttid listening on ", In(30));
  if (!endpoint) throw std::runtime_error("tuttid did not start: " + process_->transcript());
  endpoint_ = *endpoint;
}

std::string UniqueJobId() {
  static std::atomic<int> counter{0};
  return "test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

std::vector<std::unique_ptr<Process>> StartRanks(const Tuttid& tuttid, const std::string& scenario,
                                                 RankOptions options,
                                                 std::vector<std::string> args) {
  if (options.job.empty()) options.job = UniqueJobId();
  if (options.ranks.empty())
    for (int r = 0; r < options.size; ++r) options.ranks.push_back(r);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r : options.ranks) {
    std::map<std::string, std::string> env = options.env;
    if (options.rank_env)
      for (auto& [k, v] : options.rank_env(r)) env[k] = v;
    env["TUTTI_COORDINATOR"] = tuttid.endpoint();
    env["TUTTI_JOB"] = options.job;
    env["TUTTI_TOKEN"] = options.token;
    env["TUTTI_RANK"] = std::to_string(r);
    env["TUTTI_SIZE"] = std::to_string(options.size);
    env["TUTTI_TIMEOUT_MS"] = std::to_string(options.timeout_ms);
    std::vector<std::string> argv;
    if (options.rank_prefix) argv = options.rank_prefix(r);
    argv.push_back(WORKER_PATH);
    argv.push_back(scenario);
    argv.insert(argv.end(), args.begin(), args.end());
    ranks.push_back(std::make_unique<Process>(argv, env));
  }
  return ranks;
}

void ExpectTwoByTwoTopology(std::vector<std::unique_ptr<Process>>& ranks) {
  const char* expected[] = {"0 4 0 2 0 2", "1 4 1 2 0 2", "2 4 0 2 1 2", "3 4 1 2 1 2"};
  for (int r = 0; r < 4; ++r) {
    auto world = ranks[r]->ReadUntil("world ", In(60));
    ASSERT_TRUE(world) << ranks[r]->transcript();
    EXPECT_EQ(*world, expected[r]);
  }
}

void ExpectLineOnEvery(std::vector<std::unique_ptr<Process>>& ranks, const std::string& prefix,
                       const std::string& rest, int seconds) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto line = ranks[i]->ReadUntil(prefix, In(seconds));
    ASSERT_TRUE(line) << "process " << i << " never printed '" << prefix << "':\n"
                      << ranks[i]->transcript();
    EXPECT_EQ(*line, rest) << "process " << i;
  }
}

void ExpectAllSucceed(std::vector<std::unique_ptr<Process>>& ranks, int seconds) {
  const auto deadline = In(seconds);
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto status = ranks[i]->Wait(deadline);
    ASSERT_TRUE(status.has_value()) << "process " << i << " still running:\n" << ranks[i]->transcript();
    EXPECT_EQ(*status, 0) << "process " << i << " failed:\n" << ranks[i]->transcript();
  }
}

}  // namespace tutti::testing
