// tuttirun's command line (docs/launcher.md): CLI11 options, horovodrun's and mpirun's single-dash
// spellings (-np, -hostfile), and the checks that turn invalid usage into one message and status
// 2. Main thread only; parsed once before anything starts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/hosts.h"
#include "launcher/ssh_command.h"

namespace tutti::launcher {

constexpr int kUsageError = 2;

struct Options {
  int np = 0;
  std::string coordinator;
  std::string job;
  std::string log_level = "warn";
  std::string coordinator_timeline;
  bool no_prefix = false;
  // Elastic jobs (docs/elastic.md): on with --min-np.
  int min_np = 0;
  double elastic_timeout_s = 600;
  int reset_limit = -1;  // failures the job survives; -1: no limit
  int max_np = 0;        // 0: no limit
  std::string discovery_script;
  int slots_per_host = 1;
  std::vector<double> blacklist_cooldown;  // {min, max} seconds; empty: for the rest of the job
  std::string bind_to = "auto";
  bool report_bindings = false;
  // Across hosts (docs/launcher.md, "Across hosts"): from -H or --hostfile; empty: every rank
  // runs here, as before.
  std::vector<HostSlots> hosts;
  SshSettings ssh;
  int start_timeout_s = 30;
  std::string network_interface;
  // -x NAME (forwarded to remote ranks) and -x NAME=VALUE (set for every rank), in order.
  std::vector<std::string> exports;
  bool verbose = false;
  std::vector<std::string> command;
};

// Fills `opts`; returns the exit code if tuttirun should stop right away (help: 0, invalid
// usage: kUsageError after saying why).
std::optional<int> ParseOptions(int argc, char** argv, Options& opts);

}  // namespace tutti::launcher
