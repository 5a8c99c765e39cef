// SetStats: what tuttid saw of one process set, for its status page (docs/operations.md, "A page
// per job and per set"): negotiations and bytes by collective kind, how many came wholly from the
// response cache, negotiation latency, fusion of what was released, and stragglers — which member
// completed each tensor last and how long the others had waited for it.
//
// The Prometheus series of the set (SetMetrics) carry the same figures without naming ranks: a
// label per rank would multiply the series by the job's size. Here, in the status page's JSON,
// the tally by rank costs one entry per member that was ever last, which the set's own size
// bounds; the snapshot shows the `kShownStragglers` worst of them.
//
// Ownership and threads: a Job owns one per active set (kept across an elastic set's
// re-formations, dropped with the set); its negotiator and its Execute builder feed it, and the
// status description reads it, all on the coordinator's loop.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "proto/protocol.h"

namespace tutti::server {

class SetStats {
 public:
  // Stragglers listed in the JSON, worst first.
  static constexpr size_t kShownStragglers = 32;

  // One tensor's negotiation completed after `negotiation_s`; `cached`: every member announced it
  // from the response cache.
  void Negotiated(wire::CollectiveKind kind, uint64_t bytes, double negotiation_s, bool cached);
  // Every member announced the tensor and `rank` came last, `lag_s` after the one before it.
  void Straggled(int32_t rank, double lag_s);
  // One collective of `tensors` tensors went out in an Execute (fused when more than one).
  void Released(uint64_t tensors);

  // {"negotiations", "bytes", "cached", "cache_hit_rate", "by_kind", "negotiation_seconds",
  //  "fusion", "stragglers"}: docs/operations.md lists the fields.
  nlohmann::json ToJson() const;

  // A small histogram over the Prometheus series' buckets, so that the page can give quantiles
  // without keeping every observation.
  class Seconds {
   public:
    static constexpr std::array<double, 13> kBounds{1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2,
                                                    3e-2, 0.1,  0.3,  1,    3,    10};
    void Observe(double s);
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }
    double max() const { return max_; }
    // The upper bound of the bucket holding the q-quantile, never above the largest observation:
    // what the Prometheus histogram can say, read as "at most".
    double Quantile(double q) const;
    nlohmann::json ToJson() const;

   private:
    std::array<uint64_t, kBounds.size() + 1> buckets_{};  // the last one: above 10 s
    uint64_t count_ = 0;
    double sum_ = 0, max_ = 0;
  };

 private:
  struct Kind {
    uint64_t negotiations = 0, bytes = 0;
  };
  struct Straggler {
    uint64_t last = 0;  // tensors this rank completed as the last member
    double lag_sum = 0, lag_max = 0;
  };
  // Indexed by wire::CollectiveKind; validation admits collective kinds only (1 to 6).
  std::array<Kind, wire::COLLECTIVE_BARRIER + 1> kinds_{};
  uint64_t cached_ = 0;
  Seconds negotiation_;
  Seconds lag_;  // every straggler's lag, whoever it was
  std::unordered_map<int32_t, Straggler> by_rank_;
  uint64_t collectives_ = 0, tensors_ = 0, fused_tensors_ = 0;
};

}  // namespace tutti::server
