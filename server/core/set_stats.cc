#include "server/core/set_stats.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

namespace tutti::server {
namespace {

double Ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

void SetStats::Seconds::Observe(double s) {
  const auto bucket = std::lower_bound(kBounds.begin(), kBounds.end(), s) - kBounds.begin();
  ++buckets_[static_cast<size_t>(bucket)];
  ++count_;
  sum_ += s;
  max_ = std::max(max_, s);
}

double SetStats::Seconds::Quantile(double q) const {
  if (count_ == 0) return 0;
  // The rank of the q-quantile among the observations, 1-based, as Prometheus'
  // histogram_quantile counts it.
  const double wanted = q * static_cast<double>(count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (static_cast<double>(seen) >= wanted && buckets_[i] > 0)
      return i < kBounds.size() ? std::min(kBounds[i], max_) : max_;
  }
  return max_;
}

nlohmann::json SetStats::Seconds::ToJson() const {
  return {{"count", count_},
          {"sum", sum_},
          {"mean", count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_)},
          {"max", max_},
          {"p50", Quantile(0.5)},
          {"p99", Quantile(0.99)}};
}

void SetStats::Negotiated(wire::CollectiveKind kind, uint64_t bytes, double negotiation_s,
                          bool cached) {
  if (kind > 0 && static_cast<size_t>(kind) < kinds_.size()) {
    ++kinds_[kind].negotiations;
    kinds_[kind].bytes += bytes;
  }
  if (cached) ++cached_;
  negotiation_.Observe(negotiation_s);
}

void SetStats::Straggled(int32_t rank, double lag_s) {
  Straggler& s = by_rank_[rank];
  ++s.last;
  s.lag_sum += lag_s;
  s.lag_max = std::max(s.lag_max, lag_s);
  lag_.Observe(lag_s);
}

void SetStats::Released(uint64_t tensors) {
  ++collectives_;
  tensors_ += tensors;
  if (tensors > 1) fused_tensors_ += tensors;
}

nlohmann::json SetStats::ToJson() const {
  using nlohmann::json;
  uint64_t negotiations = 0, bytes = 0;
  json by_kind = json::object();
  for (size_t kind = 1; kind < kinds_.size(); ++kind) {
    if (kinds_[kind].negotiations == 0) continue;
    negotiations += kinds_[kind].negotiations;
    bytes += kinds_[kind].bytes;
    by_kind[wire::KindName(static_cast<wire::CollectiveKind>(kind))] = {
        {"negotiations", kinds_[kind].negotiations}, {"bytes", kinds_[kind].bytes}};
  }
  // Worst first: the rank last most often, then the one that kept the others waiting longest.
  std::vector<std::pair<int32_t, const Straggler*>> worst;
  worst.reserve(by_rank_.size());
  for (const auto& [rank, s] : by_rank_) worst.emplace_back(rank, &s);
  const size_t shown = std::min(worst.size(), kShownStragglers);
  std::partial_sort(worst.begin(), worst.begin() + static_cast<ptrdiff_t>(shown), worst.end(),
                    [](const auto& a, const auto& b) {
                      if (a.second->last != b.second->last) return a.second->last > b.second->last;
                      if (a.second->lag_sum != b.second->lag_sum)
                        return a.second->lag_sum > b.second->lag_sum;
                      return a.first < b.first;
                    });
  json ranks = json::array();
  for (size_t i = 0; i < shown; ++i) {
    const auto& [rank, s] = worst[i];
    ranks.push_back({{"rank", rank},
                     {"last", s->last},
                     {"share", Ratio(s->last, lag_.count())},
                     {"lag_total_seconds", s->lag_sum},
                     {"lag_mean_seconds", s->lag_sum / static_cast<double>(s->last)},
                     {"lag_max_seconds", s->lag_max}});
  }
  return {{"negotiations", negotiations},
          {"bytes", bytes},
          {"cached", cached_},
          {"cache_hit_rate", Ratio(cached_, negotiations)},
          {"by_kind", std::move(by_kind)},
          {"negotiation_seconds", negotiation_.ToJson()},
          {"fusion",
           {{"collectives", collectives_},
            {"tensors", tensors_},
            {"fused_tensors", fused_tensors_},
            {"fusion_rate", Ratio(fused_tensors_, tensors_)}}},
          {"stragglers",
           {{"observed", lag_.count()},
            {"lag_seconds", lag_.ToJson()},
            {"ranks_ever_last", by_rank_.size()},
            {"ranks", std::move(ranks)}}}};
}

}  // namespace tutti::server
