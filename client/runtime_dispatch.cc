// What tuttid tells this rank, on the coordinator link's I/O thread (the LinkListener side of
// the runtime): Execute frames matched to pending requests and handed to the set's lane (with
// this rank's share when it joined), refusals, lost ranks and the end of the link. Nothing here
// blocks: lanes run the collectives.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "client/kernels/reduce.h"
#include "client/runtime.h"
#include "client/exec/log.h"
#include "proto/status_codec.h"

namespace tutti::client {

Runtime::SetTuning Runtime::TuningOf(int32_t set_id) {
  if (any_tuning_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tuning_.find(set_id);
    if (it != tuning_.end()) return it->second;
  }
  // A tuttid of 0.11 sends no cut-offs: the built-in ones.
  SetTuning job;
  job.fusion_threshold = welcome_.fusion_threshold();
  if (welcome_.small_allreduce_bytes() > 0)
    job.cutoffs.small_allreduce_bytes = static_cast<size_t>(welcome_.small_allreduce_bytes());
  if (welcome_.pipeline_bytes() > 0) job.cutoffs.pipeline_bytes = static_cast<size_t>(welcome_.pipeline_bytes());
  return job;
}

void Runtime::OnExecute(wire::Execute& execute) {
  const int32_t set_id = execute.set_id();
  if (execute.has_tuning()) {
    const wire::Tuning& t = execute.tuning();
    SetTuning values;
    values.fusion_threshold = t.fusion_threshold();
    values.cutoffs.small_allreduce_bytes = static_cast<size_t>(std::max<int64_t>(t.small_allreduce_bytes(), 0));
    values.cutoffs.pipeline_bytes = static_cast<size_t>(std::max<int64_t>(t.pipeline_bytes(), 1));
    {
      std::lock_guard<std::mutex> lock(mu_);
      tuning_[set_id] = values;
      any_tuning_.store(true, std::memory_order_release);
    }
    // The set's first member logs its trials; the others got the same rows.
    std::vector<int32_t> members;
    if (autotune_log_.on() && t.ended_size() > 0 && sets_.Ranks(set_id, &members).ok() &&
        !members.empty() && members.front() == slot_)
      autotune_log_.Write(set_id, t);
  }
  const AlgorithmCutoffs cutoffs = TuningOf(set_id).cutoffs;
  for (auto& response : *execute.mutable_responses()) {
    const bool failed = wire::Failed(response);
    // The collective's tensors: the response's own, then those fused into it.
    std::vector<std::pair<const std::string*, std::vector<int64_t>>> tensors;
    tensors.emplace_back(&response.spec().name(),
                         std::vector<int64_t>(response.member_rows().begin(), response.member_rows().end()));
    for (const auto& part : response.fused())
      tensors.emplace_back(&part.name(), std::vector<int64_t>(part.member_rows().begin(), part.member_rows().end()));
    std::vector<FusedPart> parts;
    bool missing = false;
    for (auto& [name, rows] : tensors) {
      auto request = TakePending(set_id, *name);
      if (!request && !failed && response.partial()) request = JoinedShare(set_id, response.spec());
      if (!request) {
        missing = true;  // settled already (failed locally); an error about it needs no answer
        continue;
      }
      if (timeline_.on()) {
        timeline_.End(set_id, *name, "NEGOTIATE", {{"last_rank", response.last_rank()}});
        timeline_.Begin(set_id, *name, "QUEUE");
      }
      parts.push_back(FusedPart{std::move(request), std::move(rows), response.device_path(),
                                response.device_group(), cutoffs, execute.has_tuning(),
                                execute.tuning().trial(), response.partial()});
    }
    if (parts.empty()) continue;
    Status status;
    if (failed) status = wire::ToStatus(response.error());
    // A collective with a tensor this rank no longer has would leave the members' buffers laid out
    // differently: only possible once the set is already failing, so fail it here too.
    else if (missing)
      status = Status(Code::kInternal, "process set " + std::to_string(set_id) +
                                           ": a collective names a tensor this rank already settled");
    if (!status.ok()) {
      for (auto& part : parts) part.request->Complete(status);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto lane = lanes_.find(set_id);
    if (lane == lanes_.end()) {
      for (auto& part : parts)
        part.request->Complete(Status(Code::kInternal, "no lane for process set " + std::to_string(set_id)));
      continue;
    }
    lane->second->Push(std::move(parts));
  }
  if (execute.fast_path() == 0) return;
  // The grant (docs/steady-state.md): after these collectives the set's lane runs its stream with
  // the other members; the link put the requests whose announcements tuttid drops in the book.
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto lane = lanes_.find(set_id);
    if (lane != lanes_.end()) lane->second->EnterFastPath(execute.fast_path());
  }
  WakeLane(set_id);  // the requests the link took back may make its first round
}

void Runtime::OnRanksLost(const std::vector<int32_t>& lost_ranks, const Status& status) {
  std::vector<int32_t> broken_sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t rank : lost_ranks) {
      lost_.emplace(rank, status);
      for (auto& [id, lane] : lanes_) {
        if (!lane->members().Contains(rank)) continue;
        lane->Abort(status);  // wakes a ring step blocked on the lost rank
        broken_sets.push_back(id);
      }
    }
  }
  for (int32_t id : broken_sets) FailPending(id, status);
  for (int32_t rank : lost_ranks) p2p_->AbortPeer(rank, status);
}

void Runtime::OnLinkDead(const Status& status) { FailEverything(status); }

void Runtime::OnWarning(const std::string& what) { Log().warn("{}", what); }

void Runtime::OnFailover(bool resumed, const std::string& what) {
  if (resumed) Log().info("{}", what);
  else Log().warn("{}", what);
}

void Runtime::FailEverything(const Status& status) {
  std::vector<int32_t> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return;
    dead_ = status;
    for (auto& [id, lane] : lanes_) lane->Abort(status);
    sets = pending_.sets();
  }
  if (p2p_) p2p_->AbortAll(status);
  for (int32_t id : sets) FailPending(id, status);
  { std::lock_guard<std::mutex> lock(epoch_mu_); }  // AwaitEpoch sees dead_ or waits now
  epoch_cv_.notify_all();
}

std::shared_ptr<Request> Runtime::JoinedShare(int32_t set_id, const wire::TensorSpec& spec) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!joined_.count(set_id)) return nullptr;
  }
  Request::Operation op;
  op.spec = spec;
  op.spec.set_prescale(1.0);  // the identity is contributed as is
  // The share lives in host memory whatever the others use (tuttid stages a set with a joined
  // member: docs/gpu.md).
  op.spec.set_device_type(0);
  op.spec.set_device_index(0);
  op.spec.clear_device_uuid();
  const auto dtype = static_cast<DType>(spec.dtype());
  size_t count = 1;
  for (int64_t d : spec.shape()) count *= static_cast<size_t>(d);
  if (spec.kind() == wire::COLLECTIVE_ALLGATHER || spec.kind() == wire::COLLECTIVE_BARRIER) count = 0;
  op.count = count;
  std::vector<char> buffer(count * (spec.kind() == wire::COLLECTIVE_BARRIER ? 0 : ElementSize(dtype)));
  if (spec.kind() == wire::COLLECTIVE_ALLREDUCE)
    FillIdentity(buffer.data(), count, dtype, static_cast<ReduceOp>(spec.reduce_op()));
  return Request::WithOwnBuffer(op, std::move(buffer));
}

std::shared_ptr<Request> Runtime::TakePending(int32_t set_id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.Take(set_id, name);
}

void Runtime::FailPending(int32_t set_id, const Status& status) {
  PendingTable::ByName failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = pending_.TakeSet(set_id);
  }
  for (auto& [name, request] : failed) request->Complete(status);
}

void Runtime::OnTensorRefused(int32_t set_id, const std::string& name, const Status& why) {
  // A tuttid before 0.11 refused with REFORMED what was announced before this rank heard that the
  // set re-formed (Job::Stale; tuttid now drops it), after the mark, where that request failed
  // already. A request of the same name pending now was submitted after the mark: not refused.
  if (why.code() == Code::kReformed) return;
  link_->ForgetTensor(set_id, name);
  auto request = TakePending(set_id, name);
  if (request) request->Complete(why);
}

void Runtime::OnCommId(int32_t set_id, int32_t device_group, const std::string& id) {
  comm_ids_.Put(set_id, device_group, id);
}

}  // namespace tutti::client
