// Submission: a collective is checked (client/submission_checks.h), named, registered as pending
// and announced to tuttid, all on the application's thread and without waiting for anyone. A
// single collective and a grouped one take the same path; send and recv skip negotiation.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "client/exec/gpu_module_loader.h"
#include "client/runtime.h"

namespace tutti::client {
namespace {

// The producer's point in its stream, now: the collective waits for what was queued before
// this call and for nothing after it, and the call does not wait for the GPU.
Status RecordProducer(const TensorArgs& input, Request::Operation* op) {
  if (input.device_type != kDeviceTypeCuda) return Status::Ok();
  gpu::Module* module;
  TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
  std::string uuid;
  TUTTI_RETURN_IF_ERROR(module->DeviceUuid(input.device_index, &uuid));
  op->spec.set_device_uuid(uuid);
  return module->RecordEvent(input.device_index, input.stream, &op->ready);
}

bool IsPointToPoint(wire::CollectiveKind kind) {
  return kind == wire::POINT_TO_POINT_SEND || kind == wire::POINT_TO_POINT_RECV;
}

}  // namespace

Status Runtime::Submit(CollectiveArgs args, std::shared_ptr<Request>* request) {
  // Rank arguments are read in the membership epoch the request is submitted in.
  std::lock_guard<std::mutex> submit(submit_mu_);
  if (IsPointToPoint(args.kind)) {
    TUTTI_RETURN_IF_ERROR(sets_.CheckMember(args.set_id));
    std::vector<int32_t> members;
    TUTTI_RETURN_IF_ERROR(sets_.Ranks(args.set_id, &members));
    Request::Operation op;
    // Checked as the application numbers ranks (so that errors name its numbers), then moved to
    // slots (client/world_map.h).
    TUTTI_RETURN_IF_ERROR(CheckSubmission(args, rank(), world_.ToRanks(members), &op));
    // A device tensor: the send copies it out after its producer; a recv writes it after the
    // work queued on its stream before the call (which may still read the old contents).
    TUTTI_RETURN_IF_ERROR(RecordProducer(args.input, &op));
    args.root = world_.SlotOf(args.root);
    return SubmitPointToPoint(args, std::move(op), request);
  }
  const std::vector<TensorArgs> inputs{args.input}, outputs{args.output};
  return SubmitNegotiated(std::move(args), inputs, outputs, /*grouped=*/false, request);
}

Status Runtime::SubmitGroup(CollectiveArgs args, const std::vector<TensorArgs>& inputs,
                            const std::vector<TensorArgs>& outputs,
                            std::shared_ptr<Request>* request) {
  std::lock_guard<std::mutex> submit(submit_mu_);
  return SubmitNegotiated(std::move(args), inputs, outputs, /*grouped=*/true, request);
}

Status Runtime::SubmitNegotiated(CollectiveArgs args, const std::vector<TensorArgs>& inputs,
                                 const std::vector<TensorArgs>& outputs, bool grouped,
                                 std::shared_ptr<Request>* request) {
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(args.set_id));
  if (grouped) TUTTI_RETURN_IF_ERROR(CheckGroupDevices(args, inputs));
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(args.set_id, &members));
  auto part_name = [&](size_t i) { return args.name + "[" + std::to_string(i) + "]"; };
  std::vector<Request::Operation> ops(inputs.size());
  const std::vector<int32_t> member_ranks = world_.ToRanks(members);
  for (size_t i = 0; i < inputs.size(); ++i) {
    CollectiveArgs one = args;
    if (grouped) one.name = args.name.empty() ? "" : part_name(i);
    one.input = inputs[i];
    if (!outputs.empty()) one.output = outputs[i];
    // As for send and recv: checked in ranks, sent in slots.
    TUTTI_RETURN_IF_ERROR(CheckSubmission(one, rank(), member_ranks, &ops[i]));
    if (one.kind == wire::COLLECTIVE_BROADCAST) ops[i].spec.set_root(world_.SlotOf(one.root));
    TUTTI_RETURN_IF_ERROR(RecordProducer(one.input, &ops[i]));
  }
  // Named only once valid: an automatic name consumed by a refused call would put this rank's
  // counter out of step with the others'.
  if (args.name.empty())
    args.name = (grouped ? "grouped_" : "") + std::string(wire::KindName(args.kind)) + "." +
                std::to_string(sets_.NextAutoNameIndex(args.set_id));
  std::vector<std::shared_ptr<Request>> requests;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (grouped) {
      ops[i].spec.set_name(part_name(i));
      ops[i].spec.set_group(args.name);
      ops[i].spec.set_group_size(static_cast<int32_t>(ops.size()));
      ops[i].spec.set_group_index(static_cast<int32_t>(i));
    } else {
      ops[i].spec.set_name(args.name);
    }
    requests.push_back(std::make_shared<Request>(std::move(ops[i])));
    requests.back()->result().data.set_allocator(options_.allocator);
    Observe(args.set_id, *requests.back());
  }
  auto submitted = grouped ? Request::Group(args.name, args.kind, requests) : requests.front();
  TUTTI_RETURN_IF_ERROR(Enqueue(args.set_id, members, requests));
  *request = std::move(submitted);
  return Status::Ok();
}

Status Runtime::SubmitPointToPoint(const CollectiveArgs& args, Request::Operation op,
                                   std::shared_ptr<Request>* request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status(Code::kShutDown, "the runtime is shutting down");
    if (!dead_.ok()) return dead_;
    auto lost = lost_.find(args.root);
    if (lost != lost_.end()) return lost->second;
    auto reformed = unacknowledged_.find(args.set_id);
    if (reformed != unacknowledged_.end()) return reformed->second;
  }
  op.spec.set_name(std::string(wire::KindName(args.kind)) + " " + std::to_string(args.tag));
  auto created = std::make_shared<Request>(op);
  const size_t bytes = op.count * ElementSize(static_cast<DType>(args.input.dtype));
  if (args.kind == wire::POINT_TO_POINT_SEND)
    p2p_->Send(args.set_id, args.root, args.tag, created, bytes);
  else
    p2p_->Recv(args.set_id, args.root, args.tag, created, bytes);
  *request = std::move(created);
  return Status::Ok();
}

Status Runtime::Broken(int32_t set_id, const std::vector<int32_t>& members) {
  if (!dead_.ok()) return dead_;
  auto reformed = unacknowledged_.find(set_id);
  if (reformed != unacknowledged_.end()) return reformed->second;
  if (joined_.count(set_id))
    return Status(Code::kInvalidArgument, "rank " + std::to_string(rank()) + " has joined process set " +
                   std::to_string(set_id) + "; it cannot submit there until every member joined");
  auto lane = lanes_.find(set_id);
  if (lane != lanes_.end()) TUTTI_RETURN_IF_ERROR(lane->second->broken());
  auto left = left_sets_.find(set_id);
  if (left != left_sets_.end()) return left->second;
  for (const auto& [rank, status] : lost_)
    if (std::binary_search(members.begin(), members.end(), rank)) return status;
  return Status::Ok();
}

Status Runtime::Enqueue(int32_t set_id, const std::vector<int32_t>& members,
                        const std::vector<std::shared_ptr<Request>>& requests) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status(Code::kShutDown, "the runtime is shutting down");
    TUTTI_RETURN_IF_ERROR(Broken(set_id, members));
    TUTTI_RETURN_IF_ERROR(pending_.InsertAll(set_id, requests));
  }
  bool on_fast_path = false;
  for (const auto& request : requests) {
    if (timeline_.on()) {
      const auto& spec = request->operation().spec;
      timeline_.Begin(set_id, request->name(), request->name(),
                      {{"kind", wire::KindName(spec.kind())}, {"shape", spec.shape()},
                       {"priority", spec.priority()}});
      timeline_.Begin(set_id, request->name(), "NEGOTIATE");
    }
    if (!link_->Announce(set_id, request->operation().spec)) on_fast_path = true;
  }
  if (on_fast_path) WakeLane(set_id);  // its next round may run them (docs/steady-state.md)
  return Status::Ok();
}

void Runtime::Observe(int32_t set_id, Request& request) {
  // Only for the timeline's end event: no observer (and no allocation) when it is off, in which
  // case the submission wrote no begin event either.
  if (!timeline_.on()) return;
  request.set_observer([this, set_id, name = request.name()](const Status& status) {
    if (timeline_.on())
      timeline_.End(set_id, name, name,
                    {{"status", status.ok() ? std::string("ok") : status.message()}});
  });
}

}  // namespace tutti::client
