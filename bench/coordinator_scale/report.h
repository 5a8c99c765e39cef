// The benchmark's figures: per-phase wall time and tuttid's CPU and memory, step-latency
// percentiles, and named values; each printed as it comes (so that a profiler can be attached at
// the right phase) and kept as JSON. Single-threaded: the main thread fills it between phases.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator_scale/tuttid_process.h"

namespace tutti::bench {

// Percentiles of a sample of durations in milliseconds.
struct Latencies {
  std::vector<double> ms;
  double Percentile(double p) const;  // p in [0, 100]; 0 if empty
};

class Report {
 public:
  // One timed phase: what tuttid spent between `before` and `after`, over `units` units (steps)
  // for per-unit figures; `ok` says whether every rank got everything it waited for.
  // `unit` names the unit in the table ("step" by default).
  void Phase(const std::string& name, const ProcessSample& before, const ProcessSample& after,
             bool ok, int units = 1, const std::string& note = "", const std::string& unit = "");
  // Step latencies of phase `name` (already added).
  void Steps(const std::string& name, const Latencies& latencies);
  void Value(const std::string& name, double value, const std::string& unit);
  void Failure(const std::string& what);

  bool ok() const { return failures_.empty(); }
  const std::vector<std::string>& failures() const { return failures_; }
  const std::vector<std::string>& lines() const { return lines_; }
  nlohmann::json ToJson() const { return json_; }

 private:
  void Line(const std::string& line);

  nlohmann::json json_ = {{"phases", nlohmann::json::array()}, {"values", nlohmann::json::object()}};
  std::vector<std::string> lines_;
  std::vector<std::string> failures_;
};

}  // namespace tutti::bench
