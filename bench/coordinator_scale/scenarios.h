// The benchmark's scenarios, each against a tuttid of its own:
//  - scale: one job of --ranks ranks through every phase (rendezvous, static and dynamic process
//    sets, first and steady steps, joins, a rank that vanishes), timed, with tuttid's CPU and memory;
//  - isolation: --jobs jobs of --job-ranks ranks side by side, one quiet job's step latency alone
//    and while others flood tuttid;
//  - zmq-cost: a bare ZeroMQ ROUTER (no tuttid) with --ranks idle connections, for ZeroMQ's own
//    memory per connection.
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
  // Checks (0: none): tuttid's memory per rank after the rendezvous, ZeroMQ's connections apart.
  double max_state_bytes_per_rank = 0;
};

// Each adds its figures (and failures) to `report`.
void RunScale(const ScenarioOptions& options, Report* report);
void RunIsolation(const ScenarioOptions& options, Report* report);
void RunZmqCost(const ScenarioOptions& options, Report* report);

// tuttid's flags for a benchmark: leases long enough that ranks which never heartbeat in a long
// phase stay alive, and no per-address registration limit (every simulated rank comes from
// 127.0.0.1, which the flood limits would take for one host registering in a loop).
std::vector<std::string> BenchTuttidArgs();

}  // namespace tutti::bench
