// coordinator_scale: a load generator for tuttid (docs/scale.md). Thousands of simulated ranks,
// each a ZeroMQ DEALER speaking the real wire protocol, polled by a few threads, against a real
// tuttid it starts; it times each phase and reads tuttid's CPU and memory from /proc.
//
//   coordinator_scale --scenario scale --ranks 64 256 1024 4096
//   coordinator_scale --scenario isolation --jobs 64 --job-ranks 64
//   coordinator_scale --scenario zmq-cost --ranks 4096
//   coordinator_scale --scenario core --ranks 4096
//
// Exit status: 0 when every phase completed (every rank got every frame it waited for and the
// checks held), 1 otherwise, 2 for bad arguments.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "coordinator_scale/scenarios.h"

#ifndef TUTTID_PATH
#define TUTTID_PATH "tuttid"
#endif

namespace {

using tutti::bench::Report;
using tutti::bench::ScenarioOptions;

// One line per size of the scale scenario: the figures docs/scale.md tabulates.
void PrintSweep(const std::vector<std::pair<int, nlohmann::json>>& runs) {
  const char* heads[][2] = {{"ranks", ""},          {"rendezvous", "s wall"},
                            {"first step", "ms wall"}, {"steady", "ms cpu"},
                            {"(loop)", "ms cpu"},    {"steady", "ms p50"},
                            {"core step", "ms cpu"}, {"core state", "B/rank"},
                            {"rss-zmq", "B/rank"},   {"zmq", "B/conn"}};
  for (int line = 0; line < 2; ++line) {
    std::printf("\n");
    for (const auto& head : heads) std::printf("%12s", head[line]);
  }
  std::printf("\n");
  for (const auto& [ranks, json] : runs) {
    auto phase = [&](const std::string& name, const char* field) {
      for (const auto& p : json["phases"])
        if (p["name"] == name) return p[field].get<double>();
      return -1.0;
    };
    auto value = [&](const std::string& name) {
      return json["values"].contains(name) ? json["values"][name].get<double>() : -1.0;
    };
    std::printf("%12d%12.3f%12.1f%12.2f%12.2f%12.2f%12.2f%12.0f%12.0f%12.0f\n", ranks,
                phase("rendezvous", "wall_ms") / 1000, phase("world: first step", "wall_ms"),
                phase("world: steady step", "tuttid_cpu_ms"),
                phase("world: steady step", "tuttid_loop_cpu_ms"),
                value("world: steady step.p50_ms"), value("core: steady step cpu.p50_ms"),
                value("core: state per rank after steps"),
                value("tuttid_state_per_rank_after_rendezvous"), value("zmq_rss_per_connection"));
  }
}

// The machine's load (1-minute average) from /proc/loadavg: others' work skews wall times.
double LoadAverage() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

}  // namespace

int main(int argc, char** argv) {
  ScenarioOptions o;
  o.tuttid = TUTTID_PATH;
  std::vector<std::string> scenarios = {"scale"};
  std::vector<int> sizes = {o.ranks};
  std::string json_path;
  CLI::App app{"coordinator_scale: simulated ranks against a real tuttid (docs/scale.md)"};
  app.add_option("--scenario", scenarios, "scale, isolation, zmq-cost, core (several: in turn)")
      ->check(CLI::IsMember({"scale", "isolation", "zmq-cost", "core"}))
      ->capture_default_str();
  app.add_option("--ranks", sizes, "world sizes of the scale scenario (and zmq-cost connections)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--tensors", o.tensors, "tensors per step")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--steps", o.steps, "steady steps of the scale scenario")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--threads", o.threads, "threads polling the simulated ranks")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--ranks-per-host", o.ranks_per_host, "simulated ranks sharing a host identity")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--join-tensors", o.join_tensors, "tensors released while half the ranks joined")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--jobs", o.jobs, "isolation: jobs side by side")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--job-ranks", o.job_ranks, "isolation: ranks per job")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--isolation-steps", o.isolation_steps, "isolation: the quiet job's steps per measurement")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--phase-timeout-s", o.phase_timeout_s, "a phase not done by then fails")
      ->check(CLI::Range(1, 86400))->capture_default_str();
  app.add_option("--max-state-bytes-per-rank", o.max_state_bytes_per_rank,
                 "fail if the coordinator core keeps more than this per rank after the steps "
                 "(the core scenario's count of allocated bytes; 0: no check)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--tuttid", o.tuttid, "the tuttid program")->capture_default_str();
  app.add_option("--log-dir", o.log_dir, "where tuttid's log goes")->capture_default_str();
  app.add_option("--json", json_path, "also write every figure to this JSON file");
  CLI11_PARSE(app, argc, argv);

  tutti::bench::RaiseFileLimit();
  // Each simulated rank holds a TCP connection and an eventfd; the ZeroMQ-only ROUTER of the
  // zmq-cost measurement runs beside them.
  const int most = std::max(*std::max_element(sizes.begin(), sizes.end()), o.jobs * o.job_ranks);
  if (tutti::bench::FileLimit() < static_cast<long>(3 * most + 256)) {
    std::fprintf(stderr, "coordinator_scale: the open-file limit (%ld) is too low for %d ranks\n",
                 tutti::bench::FileLimit(), most);
    return 2;
  }
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::pair<int, nlohmann::json>> sweep;
  bool ok = true;
  auto run = [&](const std::string& scenario, int ranks, auto&& body) {
    Report report;
    const double load_before = LoadAverage();
    std::printf("== %s%s (load average %.2f)\n", scenario.c_str(),
                ranks > 0 ? fmt::format(", {} ranks", ranks).c_str() : "", load_before);
    std::fflush(stdout);
    try {
      body(&report);
    } catch (const std::exception& e) {
      report.Failure(std::string("exception: ") + e.what());
    }
    ok = ok && report.ok();
    nlohmann::json json = report.ToJson();
    json["scenario"] = scenario;
    json["ranks"] = ranks;
    json["load_average_before"] = load_before;
    json["load_average_after"] = LoadAverage();
    all.push_back(json);
    return json;
  };
  for (const std::string& scenario : scenarios) {
    if (scenario == "isolation") {
      run(scenario, 0, [&](Report* r) { tutti::bench::RunIsolation(o, r); });
      continue;
    }
    for (int ranks : sizes) {
      ScenarioOptions sized = o;
      sized.ranks = ranks;
      if (scenario == "scale")
        sweep.emplace_back(ranks, run(scenario, ranks, [&](Report* r) { tutti::bench::RunScale(sized, r); }));
      else if (scenario == "core")
        run(scenario, ranks, [&](Report* r) { tutti::bench::RunCore(sized, r); });
      else
        run(scenario, ranks, [&](Report* r) { tutti::bench::RunZmqCost(sized, r); });
    }
  }
  if (sweep.size() > 1) PrintSweep(sweep);
  if (!json_path.empty()) std::ofstream(json_path) << all.dump(2) << "\n";
  std::printf("%s\n", ok ? "coordinator_scale: all phases completed" : "coordinator_scale: FAILED");
  return ok ? 0 : 1;
}
