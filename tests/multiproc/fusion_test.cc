// Fusion, the response cache, priorities, the timeline and the stall inspector across real
// processes and a real tuttid. Where a test needs every tensor of a step released together it
// sets a batching window (TUTTI_CYCLE_TIME_MS) far longer than submitting takes.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {


struct MixRun {
  std::vector<std::string> digests;  // by rank: reducescatter leaves each rank its own block
  std::vector<std::map<std::string, long long>> counters;
};

MixRun RunMix(const std::map<std::string, std::string>& env) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  options.env = env;
  options.env["TUTTI_CYCLE_TIME_MS"] = "2000";
  auto ranks = StartRanks(tuttid, "fusion_mix", options);
  MixRun run;
  for (auto& rank : ranks) {
    auto digest = rank->ReadUntil("digest ", In(120));
    EXPECT_TRUE(digest) << rank->transcript();
    if (digest) run.digests.push_back(*digest);
    auto counters = rank->ReadUntil("counters ", In(60));
    EXPECT_TRUE(counters) << rank->transcript();
    if (counters) run.counters.push_back(Fields(*counters));
  }
  ExpectAllSucceed(ranks);
  return run;
}

// 19 tensors: 12 allreduces (7 kinds of key), a group of 3, 2 allgathers, 2 reducescatters. With
// a 16 KiB threshold: {a, b, group x3}, {big} alone (32 KiB), c, d, e, f, g alone (each its own
// dtype, op or scale), {h1, h2} (int16 average, postscale), {m1, m2} (bool), {ag1, ag2},
// {rs1, rs2}: 11 collectives, 13 tensors fused.
TEST(Fusion, GroupsExactlyWhatTheRulesAllowAndResultsMatchUnfused) {
  const MixRun fused = RunMix({{"TUTTI_FUSION_THRESHOLD", "16384"}});
  const MixRun unfused = RunMix({{"TUTTI_FUSION_THRESHOLD", "0"}});
  EXPECT_EQ(fused.digests, unfused.digests);
  for (const auto& c : fused.counters) {
    EXPECT_EQ(c.at("collectives"), 11);
    EXPECT_EQ(c.at("fused"), 13);
    EXPECT_EQ(c.at("executed"), 19);
  }
  for (const auto& c : unfused.counters) {
    EXPECT_EQ(c.at("collectives"), 19);
    EXPECT_EQ(c.at("fused"), 0);
  }
}

// 200 x 4 KiB allreduces per step: one transport collective per step, and once cached, one
// Announce of at most a fixed header plus one bit per tensor. The announcements' encoding is the
// point, so the members' fast path, which would stop them, is off (steady_state_test.cc).
TEST(Fusion, TwoHundredSmallTensorsRunAsOneCollectiveAndAnnounceAsBits) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env["TUTTI_CYCLE_TIME_MS"] = "2000";
  options.env["TUTTI_FAST_PATH"] = "0";
  auto ranks = StartRanks(tuttid, "training_steps", options, {"3", "200"});
  constexpr long long kHeaderBytes = 32;  // docs/response-cache.md
  for (auto& rank : ranks) {
    for (int step = 0; step < 3; ++step) {
      auto line = rank->ReadUntil("step " + std::to_string(step) + " ", In(120));
      ASSERT_TRUE(line) << rank->transcript();
      const auto f = Fields(*line);
      EXPECT_EQ(f.at("collectives"), 1) << *line;
      if (step == 0) {
        EXPECT_EQ(f.at("full"), 200) << *line;
        continue;
      }
      EXPECT_EQ(f.at("full"), 0) << *line;
      EXPECT_EQ(f.at("cached"), 200) << *line;
      // Usually one frame; a rank descheduled past the window sends more, each with its header.
      EXPECT_LE(f.at("bytes"), f.at("msgs") * kHeaderBytes + (200 + 7) / 8 + f.at("msgs")) << *line;
    }
  }
  ExpectAllSucceed(ranks);
}

TEST(ResponseCache, ShapeChangeOnOneRankFailsEverywhereThenRenegotiates) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "cache_invalidation", 3);
  const std::string mismatch =
      "-5 mismatched 'w' on process set 0: rank 0 sent allreduce float32[4] op=sum, rank 1 sent "
      "allreduce float32[8] op=sum";
  for (int r = 0; r < 3; ++r) {
    auto& rank = ranks[r];
    // Each step's counters: announced in full or as a bit; between them, the mismatch.
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"cache first ", "full=1 cached=0"},
        {"cache second ", "full=0 cached=1"},
        {"status w ", mismatch},
        {"cache changed ", r == 1 ? "full=1 cached=0" : "full=0 cached=1"},
        {"cache renegotiated ", "full=1 cached=0"},
        {"cache again ", "full=0 cached=1"},
    };
    for (const auto& [prefix, value] : expected) {
      auto line = rank->ReadUntil(prefix, In(60));
      ASSERT_TRUE(line) << prefix << rank->transcript();
      EXPECT_EQ(*line, value) << "rank " << r << ", " << prefix;
    }
    EXPECT_TRUE(rank->ReadUntil("cache ok", In(60))) << rank->transcript();
  }
  ExpectAllSucceed(ranks);
}

std::string TempDir() {
  char pattern[] = "/tmp/tutti-timeline-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
  return dir;
}

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return nlohmann::json::parse(in);
}

// Checks what a trace viewer needs: every event has ph, pid and ts; complete events a duration;
// async begin/end pairs nest properly per id.
void ExpectValidTrace(const nlohmann::json& trace, const std::string& what) {
  ASSERT_TRUE(trace.contains("traceEvents")) << what;
  std::map<std::string, std::vector<std::string>> open;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << what << ": " << e;
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    ASSERT_TRUE(e.contains("ts")) << what << ": " << e;
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].get<int64_t>() >= 0) << what << ": " << e;
    } else if (ph == "b") {
      open[e["pid"].dump() + "|" + e["id"].get<std::string>()].push_back(e["name"]);
    } else if (ph == "e") {
      auto& stack = open[e["pid"].dump() + "|" + e["id"].get<std::string>()];
      ASSERT_FALSE(stack.empty()) << what << ": end without begin: " << e;
      EXPECT_EQ(stack.back(), e["name"].get<std::string>()) << what << ": misnested: " << e;
      stack.pop_back();
    }
  }
  for (const auto& [id, stack] : open) EXPECT_TRUE(stack.empty()) << what << ": " << id << " left open";
}

// Higher priorities run first, ties in submission order, identically on every member; the
// timeline the runtime wrote is a valid trace.
TEST(Priorities, ReorderReleasedTensorsOnEveryMember) {
  const std::string dir = TempDir();
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env = {{"TUTTI_FUSION_THRESHOLD", "0"},
                 {"TUTTI_CYCLE_TIME_MS", "6000"},
                 {"TUTTI_TIMELINE", dir + "/prio.json"}};
  auto ranks = StartRanks(tuttid, "priorities", options);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("priorities ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
  const std::vector<std::string> expected = {"p2", "p4", "p7", "p5", "p0", "p6", "p3", "p1"};
  for (int r = 0; r < 2; ++r) {
    const std::string path = dir + "/prio.rank" + std::to_string(r) + ".json";
    const auto trace = LoadJson(path);
    ExpectValidTrace(trace, path);
    std::vector<std::pair<int64_t, std::string>> ran;
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["name"] == "ALLREDUCE")
        ran.emplace_back(e["ts"].get<int64_t>(), e["args"]["tensor"].get<std::string>());
    std::stable_sort(ran.begin(), ran.end());
    std::vector<std::string> order;
    for (const auto& [ts, name] : ran) order.push_back(name);
    EXPECT_EQ(order, expected) << "rank " << r;
  }
  std::system(("rm -rf " + dir).c_str());
}

// Ranks 0 and 1 wait for "x", which rank 2 never submits; rank 2 waits for "z", which they never
// submit. tuttid warns after 1 s naming the missing ranks and fails both after 3 s.
TEST(StallInspector, WarnsThenFailsStalledTensorsOnEveryMember) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  options.env = {{"TUTTI_STALL_WARNING_SECONDS", "1"}, {"TUTTI_STALL_SHUTDOWN_SECONDS", "3"}};
  const auto started = Clock::now();
  auto ranks = StartRanks(tuttid, "stall", options);
  for (int r = 0; r < 3; ++r) {
    const std::string name = r == 2 ? "z" : "x";
    auto status = ranks[r]->ReadUntil("status " + name + " ", In(60));
    ASSERT_TRUE(status) << ranks[r]->transcript();
    EXPECT_EQ(*status, "-10 stalled: '" + name + "' on process set 0 waited 3 s for ranks " +
                           (r == 2 ? "[0, 1]" : "[2]") + ", which never submitted it");
  }
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(30));
  ExpectAllSucceed(ranks);
  // tuttid logs the two stalls in either order: read until both failures were logged.
  auto& log = tuttid.process();
  const auto deadline = In(10);
  while (log.transcript().find("failing 'x'") == std::string::npos ||
         log.transcript().find("failing 'z'") == std::string::npos)
    if (!log.ReadLine(deadline)) break;
  EXPECT_NE(log.transcript().find("ranks [2] have not submitted 'x' after"), std::string::npos)
      << log.transcript();
  EXPECT_NE(log.transcript().find("ranks [0, 1] have not submitted 'z' after"), std::string::npos)
      << log.transcript();
}

}  // namespace
}  // namespace tutti::testing
