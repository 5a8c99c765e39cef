// ServiceMetrics: what tuttid exposes to Prometheus (docs/operations.md lists every series).
// Counters and histograms are fed by the coordinator's loop as events happen; gauges are set by
// the loop from its own state. prometheus-cpp's metrics are atomic, so the HTTP thread serializes
// them while the loop updates them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/status.h"
#include "proto/protocol.h"
#include "server/core/set_metrics.h"

namespace tutti::server {

class ServiceMetrics {
 public:
  ServiceMetrics();

  // The text exposition format (version 0.0.4) of every series.
  std::string Expose() const;

  // A frame from a rank, of `bytes` bytes.
  void FrameReceived(size_t bytes);
  // A tensor's negotiation completed: every member announced it after `seconds`.
  void Negotiated(wire::CollectiveKind kind, uint64_t tensor_bytes, double seconds);
  // An error told to a rank (a refusal, a failed collective, a fault).
  void Error(Code code);
  void StallWarned();
  void StallFailed();
  void RankLost();
  void JobStarted();
  // Registrations or announcements refused by a flood limit.
  void Limited(const std::string& limit);

  void SetJobs(size_t jobs);
  void SetRanks(size_t ranks);
  void SetProcessSets(size_t sets);
  void SetPendingTensors(size_t tensors);

  // The series per job and process set.
  SetMetrics& sets() { return *set_metrics_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  // By wire::CollectiveKind, made once: a labelled lookup per negotiated tensor (a map built and
  // a lock taken) would cost more than the negotiation itself.
  static constexpr int kKinds = 7;
  std::array<prometheus::Counter*, kKinds> negotiations_{};
  std::array<prometheus::Counter*, kKinds> tensor_bytes_{};
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* stalls_;
  prometheus::Family<prometheus::Counter>* limited_;
  prometheus::Counter* frames_;
  prometheus::Counter* frame_bytes_;
  prometheus::Counter* ranks_lost_;
  prometheus::Counter* jobs_started_;
  prometheus::Histogram* negotiation_seconds_;
  prometheus::Gauge* jobs_;
  prometheus::Gauge* ranks_;
  prometheus::Gauge* sets_;
  prometheus::Gauge* pending_;
  std::unique_ptr<SetMetrics> set_metrics_;
};

// "invalid_argument", "peer_lost", ...: the status name of tutti.h in lower case, for labels.
const char* CodeLabel(Code code);

}  // namespace tutti::server
