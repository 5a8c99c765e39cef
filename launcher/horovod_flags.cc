#include "launcher/horovod_flags.h"

#include <cstdint>
#include <iomanip>
#include <map>
#include <sstream>

namespace tutti::launcher {
namespace {

// A number as a variable's value: "30", "2.5".
std::string Number(double value) {
  std::ostringstream out;
  out << std::setprecision(15) << value;
  return out.str();
}

const char kTrialLengths[] =
    "tuttid sets the autotuner's trial lengths (tuttid --autotune-trial-tensors, "
    "--autotune-trial-ms, --autotune-warmup-tensors; docs/autotune.md)";
const char kNotBayesian[] =
    "tutti's autotuner is a coordinate search with a confirmation round, not Bayesian "
    "optimisation (docs/autotune.md)";
const char kHierarchy[] =
    "tutti chooses the hierarchical algorithms of every collective at once: give -x "
    "TUTTI_HIERARCHICAL=1 (or 0; the default, auto, picks them where the hosts are even; "
    "docs/algorithms.md)";

// horovodrun's flags that take a value and have no counterpart, with Horovod's default (which
// changes nothing, so it passes) and why not.
struct Refused {
  double horovod_default;
  const char* why;
};
const std::map<std::string, Refused>& RefusedValues() {
  static const std::map<std::string, Refused> refused = {
      {"--autotune-warmup-samples", {3, kTrialLengths}},
      {"--autotune-steps-per-sample", {10, kTrialLengths}},
      {"--autotune-bayes-opt-max-samples", {20, kNotBayesian}},
      {"--autotune-gaussian-process-noise", {0.8, kNotBayesian}},
  };
  return refused;
}

// horovodrun's switches that have no counterpart, and why.
const std::map<std::string, const char*>& RefusedSwitches() {
  static const std::map<std::string, const char*> refused = {
      {"--hierarchical-allreduce", kHierarchy},
      {"--no-hierarchical-allreduce", kHierarchy},
      {"--hierarchical-allgather", kHierarchy},
      {"--no-hierarchical-allgather", kHierarchy},
      {"--timeline-mark-cycles", "tutti's timeline has no cycle markers"},
  };
  return refused;
}

}  // namespace

const std::vector<std::string>& HorovodFlagsTakingValues() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"--fusion-threshold-mb",
                                  "--cycle-time-ms",
                                  "--cache-capacity",
                                  "--timeline-filename",
                                  "--autotune-log-file",
                                  "--stall-check-warning-time-seconds",
                                  "--stall-check-shutdown-time-seconds"};
    for (const auto& [name, refused] : RefusedValues()) v.push_back(name);
    return v;
  }();
  return names;
}

void AddHorovodFlags(CLI::App& app, HorovodFlags& flags) {
  const char* group = "horovodrun's flags (docs/launcher.md)";
  app.add_option("--fusion-threshold-mb", flags.fusion_threshold_mb,
                 "TUTTI_FUSION_THRESHOLD for every rank, in MiB")
      ->group(group)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cycle-time-ms", flags.cycle_time_ms, "TUTTI_CYCLE_TIME_MS for every rank")
      ->group(group)
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--cache-capacity", flags.cache_capacity, "TUTTI_CACHE_CAPACITY for every rank")
      ->group(group)
      ->check(CLI::Range(0L, 1L << 20));
  app.add_option("--timeline-filename", flags.timeline_filename,
                 "TUTTI_TIMELINE for every rank (each rank writes FILE.rank<R>.json)")
      ->group(group);
  app.add_flag("--autotune,!--no-autotune", flags.autotune, "TUTTI_AUTOTUNE=1 for every rank")
      ->group(group);
  app.add_option("--autotune-log-file", flags.autotune_log_file,
                 "TUTTI_AUTOTUNE_LOG for every rank (each set's first member writes its trials)")
      ->group(group);
  app.add_flag("--no-stall-check,!--stall-check", flags.no_stall_check,
               "TUTTI_STALL_WARNING_SECONDS=0 for every rank")
      ->group(group);
  app.add_option("--stall-check-warning-time-seconds", flags.stall_warning_s,
                 "TUTTI_STALL_WARNING_SECONDS for every rank")
      ->group(group)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stall-check-shutdown-time-seconds", flags.stall_shutdown_s,
                 "TUTTI_STALL_SHUTDOWN_SECONDS for every rank")
      ->group(group)
      ->check(CLI::NonNegativeNumber);
  // Refused with a reason once parsed (ApplyHorovodFlags); hidden from --help.
  for (const auto& [name, refused] : RefusedValues())
    app.add_option(name, flags.refused_values)->group("")->allow_extra_args(false);
  for (const auto& [name, why] : RefusedSwitches())
    app.add_flag(name, flags.refused_flag)->group("");
}

std::string ApplyHorovodFlags(const CLI::App& app, const HorovodFlags& flags,
                              std::vector<std::string>* exports) {
  for (const auto& [name, why] : RefusedSwitches())
    if (app.count(name)) return name + " is not supported: " + why;
  for (const auto& [name, refused] : RefusedValues()) {
    if (!app.count(name)) continue;
    const std::string given = app.get_option(name)->as<std::string>();
    double value = 0;
    try {
      value = std::stod(given);
    } catch (const std::exception&) {
      return name + " " + given + ": not a number";
    }
    if (value != refused.horovod_default)
      return name + " " + given + " is not supported: " + refused.why;
  }
  if (flags.no_stall_check && app.count("--stall-check-warning-time-seconds"))
    return "--no-stall-check and --stall-check-warning-time-seconds are alternatives: give one";
  std::vector<std::string> set;
  auto given = [&](const char* name) { return app.count(name) > 0; };
  if (given("--fusion-threshold-mb"))
    set.push_back("TUTTI_FUSION_THRESHOLD=" +
                  std::to_string(static_cast<int64_t>(flags.fusion_threshold_mb * 1024 * 1024)));
  if (given("--cycle-time-ms")) set.push_back("TUTTI_CYCLE_TIME_MS=" + Number(flags.cycle_time_ms));
  if (given("--cache-capacity"))
    set.push_back("TUTTI_CACHE_CAPACITY=" + std::to_string(flags.cache_capacity));
  if (given("--timeline-filename")) set.push_back("TUTTI_TIMELINE=" + flags.timeline_filename);
  if (flags.autotune) set.push_back("TUTTI_AUTOTUNE=1");
  if (given("--autotune-log-file")) set.push_back("TUTTI_AUTOTUNE_LOG=" + flags.autotune_log_file);
  if (flags.no_stall_check) set.push_back("TUTTI_STALL_WARNING_SECONDS=0");
  if (given("--stall-check-warning-time-seconds"))
    set.push_back("TUTTI_STALL_WARNING_SECONDS=" + Number(flags.stall_warning_s));
  if (given("--stall-check-shutdown-time-seconds"))
    set.push_back("TUTTI_STALL_SHUTDOWN_SECONDS=" + Number(flags.stall_shutdown_s));
  // In front: an explicit -x NAME=VALUE of the user's comes later and wins.
  exports->insert(exports->begin(), set.begin(), set.end());
  return "";
}

}  // namespace tutti::launcher
