// The benchmark's scenarios, each against a tuttid of its own:
//  - scale: one job of --ranks ranks through every phase (rendezvous, static and dynamic process
//    sets, first and steady steps, joins, a rank that vanishes), timed, with tuttid's CPU and memory;
//  - isolation: --jobs jobs of --job-ranks ranks side by side, one quiet job's step latency alone
//    and while others flood tuttid;
//  - zmq-cost: a bare ZeroMQ ROUTER (no tuttid) with --ranks connections, for ZeroMQ's own
//    memory per connection;
//  - core: tuttid's coordinator core in this process, no socket: the negotiation's own CPU per
//    step and the core's own memory per rank.
// Each runs on the main thread, which starts the crews' threads phase by phase.
#pragma once

#include <string>

#include "coordinator_scale/report.h"

namespace tutti::bench {

struct ScenarioOptions {
  std::string tuttid;             // the tuttid program
  std::string log_dir = "/tmp";   // where tuttid's log goes
  int ranks = 4096;
  int tensors = 200;              // per step
  int steps = 50;                 // steady steps
  int threads = 2;                // crews: threads polling the simulated ranks
  int ranks_per_host = 8;
  int join_tensors = 20;          // tensors released while half the ranks have joined
  int phase_timeout_s = 300;
  int jobs = 64, job_ranks = 64;  // isolation
  int isolation_steps = 200;
  // Check (0: none): the coordinator core's memory per rank after the steps (core scenario).
  double max_state_bytes_per_rank = 0;
};

// ZeroMQ's own memory per connection, without tuttid (the zmq-cost scenario): a ROUTER set up as
// tuttid's, in a child process, with `connections` DEALERs; idle, after a first frame each way of
// `register_bytes` and `welcome_bytes`, and after kSmallRoundTrips small frames each way.
struct ZmqConnectionCost {
  static constexpr int kSmallRoundTrips = 300;
  bool ok = false;
  long idle_rss = 0;  // the ROUTER's process before any connection
  double per_idle_connection = 0, per_connection = 0, per_busy_connection = 0;  // bytes
};
ZmqConnectionCost MeasureZmqConnectionCost(int connections, size_t register_bytes,
                                           size_t welcome_bytes, int threads);

// Each adds its figures (and failures) to `report`.
void RunScale(const ScenarioOptions& options, Report* report);
void RunIsolation(const ScenarioOptions& options, Report* report);
void RunZmqCost(const ScenarioOptions& options, Report* report);
void RunCore(const ScenarioOptions& options, Report* report);

// tuttid's flags for a benchmark: leases long enough that ranks which never heartbeat in a long
// phase stay alive, and no per-address registration limit (every simulated rank comes from
// 127.0.0.1, which the flood limits would take for one host registering in a loop).
std::vector<std::string> BenchTuttidArgs();
// Whether a line of the file at `path` (tuttid's log) contains `text`.
bool LogMentions(const std::string& path, const std::string& text);

}  // namespace tutti::bench
