#include "server/core/set_metrics.h"

namespace tutti::server {
namespace {

const prometheus::Histogram::BucketBoundaries& Seconds() {
  static const prometheus::Histogram::BucketBoundaries buckets{
      1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10};
  return buckets;
}

}  // namespace

SetMetrics::SetMetrics(prometheus::Registry& registry) {
  using namespace prometheus;
  negotiations_ = &BuildCounter()
                       .Name("tutti_set_negotiations_total")
                       .Help("Tensors whose negotiation completed, per job and process set")
                       .Register(registry);
  bytes_ = &BuildCounter()
                .Name("tutti_set_negotiated_bytes_total")
                .Help("Bytes of those tensors, per job and process set")
                .Register(registry);
  cached_ = &BuildCounter()
                 .Name("tutti_set_cached_negotiations_total")
                 .Help("Of those, tensors every member announced from the response cache")
                 .Register(registry);
  negotiation_seconds_ = &BuildHistogram()
                              .Name("tutti_set_negotiation_seconds")
                              .Help("From a tensor's first announcement to the last member's, "
                                    "per job and process set")
                              .Register(registry);
  straggler_seconds_ = &BuildHistogram()
                            .Name("tutti_set_straggler_seconds")
                            .Help("How long each tensor's last member came after the one before "
                                  "it, per job and process set")
                            .Register(registry);
}

SetMetrics::Series SetMetrics::Make(const std::string& job, const std::string& set) {
  const std::map<std::string, std::string> labels{{"job", job}, {"set", set}};
  return Series{&negotiations_->Add(labels), &bytes_->Add(labels), &cached_->Add(labels),
                &negotiation_seconds_->Add(labels, Seconds()),
                &straggler_seconds_->Add(labels, Seconds())};
}

SetMetrics::Series* SetMetrics::For(const std::string& job, int32_t set_id) {
  auto key = std::make_pair(job, set_id);
  auto it = labelled_.find(key);
  if (it != labelled_.end()) return &it->second;
  if (labelled_.size() < max_labelled_sets_)
    return &labelled_.emplace(std::move(key), Make(job, std::to_string(set_id))).first->second;
  if (other_.negotiations == nullptr) other_ = Make("_other", "_other");
  return &other_;
}

void SetMetrics::Remove(const Series& series) {
  negotiations_->Remove(series.negotiations);
  bytes_->Remove(series.bytes);
  cached_->Remove(series.cached);
  negotiation_seconds_->Remove(series.negotiation_seconds);
  straggler_seconds_->Remove(series.straggler_seconds);
}

void SetMetrics::ForgetJob(const std::string& job) {
  auto it = labelled_.lower_bound(std::make_pair(job, INT32_MIN));
  while (it != labelled_.end() && it->first.first == job) {
    Remove(it->second);
    it = labelled_.erase(it);
  }
}

void SetMetrics::Observe(Series* series, uint64_t bytes, double negotiation_s, double straggler_s,
                         bool cached) {
  series->negotiations->Increment();
  series->bytes->Increment(static_cast<double>(bytes));
  if (cached) series->cached->Increment();
  series->negotiation_seconds->Observe(negotiation_s);
  series->straggler_seconds->Observe(straggler_s);
}

}  // namespace tutti::server
