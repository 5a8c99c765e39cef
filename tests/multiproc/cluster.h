// A real tuttid and real worker processes on loopback, as the multi-process tests use them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "multiproc/process.h"

namespace tutti::testing {

// tuttid on an OS-chosen port; its endpoint is read from its first output line.
class Tuttid {
 public:
  // `prefix` runs tuttid through another program (e.g. "ip netns exec NAME").
  explicit Tuttid(std::vector<std::string> extra_args = {}, std::vector<std::string> prefix = {});
  const std::string& endpoint() const { return endpoint_; }
  Process& process() { return *process_; }

 private:
  std::unique_ptr<Process> process_;
  std::string endpoint_;
};

struct RankOptions {
  std::string job;                          // default: a fresh unique id
  std::string token = "secret";
  int size = 4;
  std::vector<int> ranks;                   // which ranks to start; default: all
  std::map<std::string, std::string> env;   // extra environment
  // Extra environment of one rank, on top of `env` (e.g. a host identity per rank).
  std::function<std::map<std::string, std::string>(int rank)> rank_env;
  // A program a rank runs through (e.g. "ip netns exec NAME"), if any.
  std::function<std::vector<std::string>(int rank)> rank_prefix;
  int64_t timeout_ms = 60000;
};

// Starts `tutti_test_worker SCENARIO args...` as the ranks of one job. Index i of the result is
// the i-th started rank.
std::vector<std::unique_ptr<Process>> StartRanks(const Tuttid& tuttid, const std::string& scenario,
                                                 RankOptions options,
                                                 std::vector<std::string> args = {});

// The common case: every rank of a world of `size`, default options.
inline std::vector<std::unique_ptr<Process>> StartRanks(const Tuttid& tuttid,
                                                        const std::string& scenario, int size,
                                                        std::vector<std::string> args = {}) {
  RankOptions options;
  options.size = size;
  return StartRanks(tuttid, scenario, options, std::move(args));
}

// A worker's "key=value key=value" line -> map.
inline std::map<std::string, long long> Fields(const std::string& line) {
  std::map<std::string, long long> fields;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string::npos) end = line.size();
    const std::string item = line.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) fields[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
    at = end + 1;
  }
  return fields;
}

// A job id no other test of this run uses.
std::string UniqueJobId();

// Checks the "world ..." lines of the "basic" scenario for ranks 0,1 on one host and 2,3 on
// another: local rank and size, cross rank and size.
void ExpectTwoByTwoTopology(std::vector<std::unique_ptr<Process>>& ranks);

// Expects every process to print `prefix` followed by exactly `rest` within `seconds`.
void ExpectLineOnEvery(std::vector<std::unique_ptr<Process>>& ranks, const std::string& prefix,
                       const std::string& rest, int seconds = 60);

// Waits for every process to exit and expects status 0, printing transcripts otherwise.
void ExpectAllSucceed(std::vector<std::unique_ptr<Process>>& ranks, int seconds = 120);

}  // namespace tutti::testing
