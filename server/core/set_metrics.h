// SetMetrics: tuttid's Prometheus series per process set, labelled {job, set}
// (docs/operations.md): negotiations, their bytes and how many came wholly from the response
// cache, negotiation latency, and stragglers — how long each tensor's last member kept the
// others waiting, as a histogram per set (no per-rank label: the rank is a name on the status
// page, not a series).
//
// Cardinality is capped: the first `max_labelled_sets` {job, set} pairs get series of their own
// (default 256, tuttid --metrics-max-sets); later ones share {job="_other", set="_other"}. A job's
// series go when the job ends (ForgetJob), which frees their places.
//
// Thread model: For, ForgetJob and Observe run on the coordinator's loop; prometheus-cpp's
// families and metrics are safe to serialize from the HTTP thread meanwhile.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace tutti::server {

class SetMetrics {
 public:
  static constexpr size_t kDefaultMaxLabelledSets = 256;

  struct Series {
    prometheus::Counter* negotiations = nullptr;
    prometheus::Counter* bytes = nullptr;
    prometheus::Counter* cached = nullptr;
    prometheus::Histogram* negotiation_seconds = nullptr;
    prometheus::Histogram* straggler_seconds = nullptr;
  };

  explicit SetMetrics(prometheus::Registry& registry);

  void set_max_labelled_sets(size_t n) { max_labelled_sets_ = n; }
  // The set's series; valid until ForgetJob(job).
  Series* For(const std::string& job, int32_t set_id);
  void ForgetJob(const std::string& job);
  // One tensor negotiated: `straggler_s` is how long its last member came after the one before
  // (0 for a set of one); `cached`: every member announced it from the response cache.
  static void Observe(Series* series, uint64_t bytes, double negotiation_s, double straggler_s,
                      bool cached);

 private:
  Series Make(const std::string& job, const std::string& set);
  void Remove(const Series& series);

  prometheus::Family<prometheus::Counter>* negotiations_;
  prometheus::Family<prometheus::Counter>* bytes_;
  prometheus::Family<prometheus::Counter>* cached_;
  prometheus::Family<prometheus::Histogram>* negotiation_seconds_;
  prometheus::Family<prometheus::Histogram>* straggler_seconds_;
  size_t max_labelled_sets_ = kDefaultMaxLabelledSets;
  std::map<std::pair<std::string, int32_t>, Series> labelled_;
  Series other_;  // made on first use, never removed
};

}  // namespace tutti::server
