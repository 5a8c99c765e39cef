#include "server/core/service_metrics.h"

#include <string>

#include <prometheus/text_serializer.h>

namespace tutti::server {
namespace {

const char* KindLabel(wire::CollectiveKind kind) {
  switch (kind) {
    case wire::COLLECTIVE_ALLREDUCE: return "allreduce";
    case wire::COLLECTIVE_ALLGATHER: return "allgather";
    case wire::COLLECTIVE_BROADCAST: return "broadcast";
    case wire::COLLECTIVE_ALLTOALL: return "alltoall";
    case wire::COLLECTIVE_REDUCESCATTER: return "reducescatter";
    case wire::COLLECTIVE_BARRIER: return "barrier";
    default: return "other";
  }
}

}  // namespace

const char* CodeLabel(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kUnknownSet: return "unknown_set";
    case Code::kNotAMember: return "not_a_member";
    case Code::kDuplicateName: return "duplicate_name";
    case Code::kMismatch: return "mismatch";
    case Code::kPeerLost: return "peer_lost";
    case Code::kCoordinatorLost: return "coordinator_lost";
    case Code::kTimeout: return "timeout";
    case Code::kAborted: return "aborted";
    case Code::kStalled: return "stalled";
    case Code::kVersionMismatch: return "version_mismatch";
    case Code::kAuthFailed: return "auth_failed";
    case Code::kShutDown: return "shut_down";
    case Code::kInternal: return "internal";
    case Code::kSetRemoved: return "set_removed";
    case Code::kUnsupported: return "unsupported";
    case Code::kEvicted: return "evicted";
    case Code::kLimitExceeded: return "limit_exceeded";
    case Code::kDeviceUnavailable: return "device_unavailable";
    case Code::kReformed: return "reformed";
  }
  return "unknown";
}

ServiceMetrics::ServiceMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  using namespace prometheus;
  auto& negotiations = BuildCounter()
                           .Name("tutti_negotiations_total")
                           .Help("Tensors whose negotiation completed, by collective kind")
                           .Register(*registry_);
  auto& tensor_bytes = BuildCounter()
                           .Name("tutti_negotiated_bytes_total")
                           .Help("Bytes of the tensors announced and negotiated, by collective kind")
                           .Register(*registry_);
  for (int kind = wire::COLLECTIVE_ALLREDUCE; kind < kKinds; ++kind) {
    const char* label = KindLabel(static_cast<wire::CollectiveKind>(kind));
    negotiations_[kind] = &negotiations.Add({{"kind", label}});
    tensor_bytes_[kind] = &tensor_bytes.Add({{"kind", label}});
  }
  errors_ = &BuildCounter()
                 .Name("tutti_errors_total")
                 .Help("Errors told to ranks (refusals, failed collectives, faults), by status")
                 .Register(*registry_);
  stalls_ = &BuildCounter()
                 .Name("tutti_stalls_total")
                 .Help("Tensors some members submitted and others did not in time, by outcome")
                 .Register(*registry_);
  limited_ = &BuildCounter()
                  .Name("tutti_limited_total")
                  .Help("Requests refused by a flood limit, by limit")
                  .Register(*registry_);
  // Every label these families can have is known, so each series starts at 0 rather than
  // appearing with its first event: a rate over a series that did not exist before reads as no
  // data, and a dashboard's query (packaging/grafana) names a family that is always exported.
  for (int code = -1; std::string(CodeLabel(static_cast<Code>(code))) != "unknown"; --code)
    errors_->Add({{"status", CodeLabel(static_cast<Code>(code))}});
  for (const char* outcome : {"warned", "failed"}) stalls_->Add({{"outcome", outcome}});
  // The limits' names as their callers give them (CoordinatorCore::RefuseLimited, Job::Refuse).
  for (const char* limit : {"jobs", "registrations_per_address", "rendezvous_ranks_per_address",
                            "rendezvous_jobs_per_address", "pending_tensors"})
    limited_->Add({{"limit", limit}});
  frames_ = &BuildCounter()
                 .Name("tutti_frames_received_total")
                 .Help("Frames received from ranks")
                 .Register(*registry_)
                 .Add({});
  frame_bytes_ = &BuildCounter()
                      .Name("tutti_frame_bytes_received_total")
                      .Help("Bytes of the frames received from ranks")
                      .Register(*registry_)
                      .Add({});
  ranks_lost_ = &BuildCounter()
                     .Name("tutti_ranks_lost_total")
                     .Help("Ranks declared lost (silent past their lease) or aborted")
                     .Register(*registry_)
                     .Add({});
  jobs_started_ = &BuildCounter()
                       .Name("tutti_jobs_started_total")
                       .Help("Jobs whose rendezvous completed")
                       .Register(*registry_)
                       .Add({});
  // 10 us to about 10 s: a steady-state negotiation takes tens of microseconds on tuttid, a stalled
  // one as long as the slowest rank.
  negotiation_seconds_ = &BuildHistogram()
                              .Name("tutti_negotiation_seconds")
                              .Help("From a tensor's first announcement to the last member's")
                              .Register(*registry_)
                              .Add({}, Histogram::BucketBoundaries{
                                           1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2,
                                           0.1, 0.3, 1, 3, 10});
  auto gauge = [this](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(*registry_).Add({});
  };
  jobs_ = gauge("tutti_jobs", "Jobs served (waiting for their rendezvous or running)");
  ranks_ = gauge("tutti_ranks", "Ranks registered and alive");
  sets_ = gauge("tutti_process_sets", "Active process sets, the world sets included");
  pending_ = gauge("tutti_pending_tensors", "Tensors announced by some members of their set only");
  set_metrics_ = std::make_unique<SetMetrics>(*registry_);
}

std::string ServiceMetrics::Expose() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void ServiceMetrics::FrameReceived(size_t bytes) {
  frames_->Increment();
  frame_bytes_->Increment(static_cast<double>(bytes));
}

void ServiceMetrics::Negotiated(wire::CollectiveKind kind, uint64_t tensor_bytes, double seconds) {
  // Validation admits collective kinds only (1 to 6).
  if (kind > 0 && kind < kKinds) {
    negotiations_[kind]->Increment();
    tensor_bytes_[kind]->Increment(static_cast<double>(tensor_bytes));
  }
  negotiation_seconds_->Observe(seconds);
}

void ServiceMetrics::Error(Code code) { errors_->Add({{"status", CodeLabel(code)}}).Increment(); }
void ServiceMetrics::StallWarned() { stalls_->Add({{"outcome", "warned"}}).Increment(); }
void ServiceMetrics::StallFailed() { stalls_->Add({{"outcome", "failed"}}).Increment(); }
void ServiceMetrics::RankLost() { ranks_lost_->Increment(); }
void ServiceMetrics::JobStarted() { jobs_started_->Increment(); }
void ServiceMetrics::Limited(const std::string& limit) {
  limited_->Add({{"limit", limit}}).Increment();
}

void ServiceMetrics::SetJobs(size_t n) { jobs_->Set(static_cast<double>(n)); }
void ServiceMetrics::SetRanks(size_t n) { ranks_->Set(static_cast<double>(n)); }
void ServiceMetrics::SetProcessSets(size_t n) { sets_->Set(static_cast<double>(n)); }
void ServiceMetrics::SetPendingTensors(size_t n) { pending_->Set(static_cast<double>(n)); }

}  // namespace tutti::server
