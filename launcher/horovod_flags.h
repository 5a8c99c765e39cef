// horovodrun's tuning flags on tuttirun's command line (docs/launcher.md, "horovodrun's
// flags"): those tutti has a counterpart for become that TUTTI_ variable for every rank, as if
// given with -x NAME=VALUE before any -x of the user's (so an explicit -x still wins); those it
// has none for are usage errors that say what to use instead, never accepted and ignored.
// Main thread only, while the command line is parsed.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tutti::launcher {

struct HorovodFlags {
  double fusion_threshold_mb = 0;
  double cycle_time_ms = 0;
  long cache_capacity = 0;
  std::string timeline_filename;
  bool autotune = false;
  std::string autotune_log_file;
  bool no_stall_check = false;
  double stall_warning_s = 0, stall_shutdown_s = 0;
  // Flags refused with a reason: parsed so that the reason, not "unknown option", is said.
  std::vector<std::string> refused_values;
  bool refused_flag = false;
};

// The flags that take a value, for NormalizeArgs to skip their values.
const std::vector<std::string>& HorovodFlagsTakingValues();

void AddHorovodFlags(CLI::App& app, HorovodFlags& flags);

// After parsing: the rank variables the given flags stand for, put in front of `exports`; or
// the usage problem of a flag tutti has no counterpart for (then nothing changes).
std::string ApplyHorovodFlags(const CLI::App& app, const HorovodFlags& flags,
                              std::vector<std::string>* exports);

}  // namespace tutti::launcher
