#include "client/exec/lane.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include <nlohmann/json.hpp>

#include "client/exec/collectives.h"

namespace tutti::client {
namespace {

std::string ToUpper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

Lane::Lane(int32_t set_id, std::vector<int32_t> members, int32_t self,
           std::unique_ptr<transport::Context> context, std::chrono::milliseconds step_timeout,
           Counters* counters, SetCounters* set_counters, Timeline* timeline, CommIdRelay relay,
           std::function<void(int32_t, bool)> report_closed, FastPathPort* fast_path,
           std::chrono::milliseconds fast_path_patience, SetTopology topology)
    : set_id_(set_id),
      members_(MemberList(std::move(members))),
      topology_(std::move(topology)),
      self_(self),
      context_(std::move(context)),
      step_timeout_(step_timeout),
      counters_(counters),
      set_counters_(set_counters),
      timeline_(timeline),
      relay_(std::move(relay)),
      report_closed_(std::move(report_closed)),
      port_(fast_path),
      patience_(fast_path_patience),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { Run(); });
}

Lane::~Lane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  Wake();
  thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Lane::Push(std::vector<FusedPart> parts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(parts)});
  }
  work_cv_.notify_one();
}

void Lane::EnterFastPath(uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{{}, generation});
  }
  work_cv_.notify_one();
}

void Lane::Wake() {
  // Whoever calls this changed the lane's state first; a wake still pending makes the lane look
  // at that state after it drains, so this one may be skipped (seq_cst: see DrainWake).
  if (wake_pending_.exchange(true)) return;
  const uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void Lane::EndFastPath() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_fast_path_ = true;
  }
  work_cv_.notify_one();
  Wake();
}

void Lane::DrainWake() {
  // Cleared before the lane reads its state again: a Wake after this writes the eventfd anew.
  wake_pending_.store(false);
  uint64_t count;
  [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));
}

void Lane::Run() {
  while (true) {
    std::optional<Item> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (end_fast_path_) fast_.on = false;
      // On the fast path the lane waits in FastPathStep, for its peers as well as for work.
      if (!fast_.on) work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (!queue_.empty()) {
        item = std::move(queue_.front());
        queue_.pop_front();
      } else if (stopping_) {
        return;  // every released collective ran
      }
    }
    if (!item) {
      if (fast_.on) FastPathStep();
      continue;
    }
    if (item->fast_path != 0) {
      StartFastPath(item->fast_path);
      continue;
    }
    RunWork(item->work);
  }
}

void Lane::RunWork(Work& work) {
  {
    const auto started = std::chrono::steady_clock::now();
    uint64_t waited_ns = 0, bytes = 0;
    for (const auto& part : work) {
      timeline_->End(set_id_, part.request->name(), "QUEUE");
      timeline_->Begin(set_id_, part.request->name(), "EXECUTE");
      waited_ns += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(started - part.request->submitted())
              .count());
      const auto& operation = part.request->operation();
      bytes += operation.count * ElementSize(static_cast<DType>(operation.spec.dtype()));
    }
    Status status = Execute(work);
    if (status.code() == Code::kPeerLost || status.code() == Code::kAuthFailed) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (broken_.ok()) broken_ = Status(status.code(), peer_lost_cause_);
      }
      const int32_t closed = context_->closed_peer();
      if (closed >= 0 && report_closed_ && !reported_closed_) {
        reported_closed_ = true;
        report_closed_(closed, status.code() == Code::kAuthFailed);
      }
    }
    Counters::Add(counters_->collectives, 1);
    Counters::Add(counters_->tensors_executed, work.size());
    if (work.size() > 1) Counters::Add(counters_->tensors_fused, work.size());
    Counters::Add(set_counters_->collectives, 1);
    Counters::Add(set_counters_->tensors, work.size());
    if (work.size() > 1) Counters::Add(set_counters_->tensors_fused, work.size());
    Counters::Add(set_counters_->bytes, bytes);
    Counters::Add(set_counters_->wait_ns, waited_ns);
    const auto spent = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - started);
    Counters::Add(set_counters_->execute_ns, static_cast<uint64_t>(spent.count()));
    // Before the requests complete: a caller that waited on them and announces again reports it.
    if (!work.empty() && work.front().tuned && status.ok())
      counters_->trials.Record(set_id_, work.front().trial, bytes, spent);
    for (auto& part : work) {
      timeline_->End(set_id_, part.request->name(), "EXECUTE");
      part.request->Complete(status);
    }
  }
}

Status Lane::ExecuteOnDevice(const RingArgs& ring, Work& work) {
  const auto& spec = work.front().request->operation().spec;
  DeviceArgs args;
  args.set_id = set_id_;
  args.members = &members_;
  args.self = self_;
  args.timeout = step_timeout_;
  args.interrupted = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  };
  args.publish_comm_id = relay_.publish;
  args.await_comm_id = relay_.await;
  args.synchronous_phases = timeline_->on();
  args.state = &device_state_;
  const bool fused = work.size() > 1;
  const auto observe = [&](const char* phase, auto began) {
    if (fused) timeline_->Span(set_id_, phase, began);
  };
  const bool nccl = work.front().device_path == wire::DEVICE_PATH_NCCL;
  const auto start = Timeline::WallClock::now();
  Status status = nccl ? RunNcclCollective(args, work, observe)
                       : RunStagedCollective(args, ring, work, &fusion_buffer_, observe);
  if (timeline_->on()) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& part : work) names.push_back(part.request->name());
    timeline_->Span(set_id_,
                    std::string(fused ? "FUSED " : "") + ToUpper(wire::KindName(spec.kind())) +
                        (nccl ? " (NCCL)" : " (STAGED)"),
                    start, {{"tensors", std::move(names)}});
  }
  return status;
}

Status Lane::ExecuteCompressed(const RingArgs& ring, Work& work) {
  const auto start = Timeline::WallClock::now();
  CompressionReport report;
  Status status = RunCompressedAllreduce(ring, work, &compression_, &fusion_buffer_, &report);
  uint64_t compressed = 0, chose_compression = 0;
  for (compress::Kind kind : report.used) compressed += kind != compress::Kind::kNone;
  for (const auto& [name, decision] : report.revisits) chose_compression += decision.choice != compress::Kind::kNone;
  Counters::Add(set_counters_->tensors_compressed, compressed);
  Counters::Add(set_counters_->adaptive_revisits, report.revisits.size());
  Counters::Add(set_counters_->adaptive_compress_choices, chose_compression);
  if (timeline_->on()) {
    for (const auto& [name, decision] : report.revisits)
      timeline_->Instant(set_id_, "COMPRESSION_DECISION",
                         {{"tensor", name},
                          {"allreduce", decision.allreduce},
                          {"choice", compress::KindName(decision.choice)},
                          {"change", decision.change}});
    nlohmann::json names = nlohmann::json::array(), used = nlohmann::json::array();
    for (size_t p = 0; p < work.size(); ++p) {
      names.push_back(work[p].request->name());
      used.push_back(compress::KindName(report.used[p]));
    }
    timeline_->Span(set_id_, work.size() > 1 ? "FUSED ALLREDUCE" : "ALLREDUCE", start,
                    {{"tensors", std::move(names)}, {"compression", std::move(used)}});
  }
  return status;
}

Status Lane::Execute(Work& work) {
  // The algorithm the collective chose (hierarchical.h), for the timeline.
  Algorithm ran = Algorithm::kNone;
  const RingArgs ring{context_.get(), &members_, self_,   step_timeout_,
                      &scratch_,      &topology_, &ran, work.front().cutoffs};
  const auto& spec = work.front().request->operation().spec;
  Status status;
  const bool on_device = std::any_of(work.begin(), work.end(), [](const FusedPart& part) {
    return part.request->operation().spec.device_type() != 0;
  });
  if (on_device) {
    status = ExecuteOnDevice(ring, work);
  } else if (spec.kind() == wire::COLLECTIVE_ALLREDUCE && spec.compression().kind() != 0) {
    status = ExecuteCompressed(ring, work);
  } else if (work.size() == 1) {
    const auto start = Timeline::WallClock::now();
    status = RunCollective(ring, *work.front().request, work.front().member_rows);
    if (timeline_->on()) {
      nlohmann::json args = {{"tensor", spec.name()}};
      if (ran != Algorithm::kNone) args["algorithm"] = AlgorithmName(ran);
      timeline_->Span(set_id_, ToUpper(wire::KindName(spec.kind())), start, std::move(args));
    }
  } else {
    nlohmann::json names = nlohmann::json::array();
    if (timeline_->on())
      for (const auto& part : work) names.push_back(part.request->name());
    const auto start = Timeline::WallClock::now();
    status = RunFused(ring, work, &fusion_buffer_, [&](const char* phase, auto began) {
      timeline_->Span(set_id_, phase, began);
    });
    if (timeline_->on()) {
      nlohmann::json args = {{"tensors", std::move(names)}};
      if (ran != Algorithm::kNone) args["algorithm"] = AlgorithmName(ran);
      timeline_->Span(set_id_, "FUSED " + ToUpper(wire::KindName(spec.kind())), start, std::move(args));
    }
  }
  if (status.ok()) return status;
  if (status.code() == Code::kPeerLost || status.code() == Code::kAuthFailed)
    peer_lost_cause_ = status.message();
  const std::string what = work.size() == 1 ? "'" + spec.name() + "'"
                                            : "fused with '" + spec.name() + "' and " +
                                                  std::to_string(work.size() - 1) + " more";
  return Status(status.code(), status.message() + " (" + wire::KindName(spec.kind()) + " " + what +
                                   " on process set " + std::to_string(set_id_) + ")");
}

}  // namespace tutti::client
