#include "coordinator_scale/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace tutti::bench {

double Latencies::Percentile(double p) const {
  if (ms.empty()) return 0;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest value with at least p% of the sample at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void Report::Phase(const std::string& name, const ProcessSample& before, const ProcessSample& after,
                   bool ok, int units, const std::string& note, const std::string& unit) {
  const Usage used = Between(before, after);
  const double per = 1000.0 / std::max(units, 1);
  nlohmann::json phase = {{"name", name},
                          {"ok", ok},
                          {"units", units},
                          {"unit", unit.empty() ? "step" : unit},
                          {"wall_ms", used.wall_s * per},
                          {"tuttid_cpu_ms", used.cpu_s * per},
                          {"tuttid_loop_cpu_ms", used.loop_cpu_s * per},
                          {"tuttid_zmq_cpu_ms", used.zmq_cpu_s * per},
                          {"tuttid_stat_cpu_ms", (after.stat_cpu_s - before.stat_cpu_s) * per},
                          {"tuttid_rss_before", before.rss_bytes},
                          {"tuttid_rss_after", after.rss_bytes},
                          {"tuttid_peak_rss", after.peak_rss_bytes}};
  if (!note.empty()) phase["note"] = note;
  json_["phases"].push_back(phase);
  Line(fmt::format(
      "{:<28} {:>10.2f} ms wall{:<6}  tuttid cpu {:>9.2f} ms (loop {:.2f}, zmq {:.2f})  rss {:.1f} -> "
      "{:.1f} MiB{}{}",
      name, used.wall_s * per, units > 1 ? "/" + (unit.empty() ? std::string("step") : unit) : "",
      used.cpu_s * per,
      used.loop_cpu_s * per, used.zmq_cpu_s * per, before.rss_bytes / 1048576.0,
      after.rss_bytes / 1048576.0, ok ? "" : "  FAILED", note.empty() ? "" : "  " + note));
  if (!ok) failures_.push_back(name);
}

void Report::Steps(const std::string& name, const Latencies& latencies) {
  const double p50 = latencies.Percentile(50), p99 = latencies.Percentile(99),
               max = latencies.Percentile(100);
  json_["values"][name + ".p50_ms"] = p50;
  json_["values"][name + ".p99_ms"] = p99;
  json_["values"][name + ".max_ms"] = max;
  Line(fmt::format("{:<28} step latency p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms "
                               "({} steps)",
                               name, p50, p99, max, latencies.ms.size()));
}

void Report::Value(const std::string& name, double value, const std::string& unit) {
  json_["values"][name] = value;
  Line(fmt::format("{:<28} {:.1f} {}", name, value, unit));
}

void Report::Failure(const std::string& what) {
  failures_.push_back(what);
  Line("FAILED: " + what);
}

void Report::Line(const std::string& line) {
  lines_.push_back(line);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace tutti::bench
