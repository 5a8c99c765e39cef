#include "client/runtime.h"

#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "client/gpu_module_loader.h"
#include "client/reduce.h"
#include "proto/status_codec.h"
#include "transport/handshake.h"

namespace tutti::client {
namespace {

// Client-side margin over a deadline the coordinator enforces itself, so that its precise error
// (naming missing ranks) arrives before the client gives up on the coordinator.
constexpr auto kCoordinatorGrace = std::chrono::seconds(5);

std::chrono::milliseconds Ms(int64_t ms) { return std::chrono::milliseconds(ms); }

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// tutti.h's TUTTI_DEVICE_* (client/ does not include the public header).
constexpr int32_t TUTTI_DEVICE_TYPE_CPU = 0;
constexpr int32_t TUTTI_DEVICE_TYPE_CUDA = 1;

std::string DeviceName(const TensorArgs& t) {
  return t.device_type == TUTTI_DEVICE_TYPE_CUDA ? "cuda:" + std::to_string(t.device_index) : "cpu";
}

Status CheckTensor(const char* which, const TensorArgs& t, size_t* count) {
  if (t.data == nullptr && !t.shape.empty()) {
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    if (elements != 0) return Invalid(std::string(which) + " tensor has no data pointer");
  }
  if (!IsValidDType(t.dtype))
    return Invalid(std::string(which) + " tensor has unknown dtype " + std::to_string(t.dtype));
  if (t.device_type == TUTTI_DEVICE_TYPE_CUDA) {
    if (t.device_index < 0)
      return Invalid(std::string(which) + " tensor has device index " + std::to_string(t.device_index));
    Status usable = CheckCudaDevice(t.device_index);
    if (!usable.ok())
      return Status(usable.code(), std::string(which) + " tensor is on cuda:" +
                                       std::to_string(t.device_index) + ": " + usable.message());
  } else if (t.device_type != TUTTI_DEVICE_TYPE_CPU) {
    return Invalid(std::string(which) + " tensor has unknown device type " +
                   std::to_string(t.device_type));
  }
  int64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return Invalid(std::string(which) + " tensor has a negative dimension");
    if (d != 0 && elements > (int64_t{1} << 56) / d)
      return Invalid(std::string(which) + " tensor is too large");
    elements *= d;
  }
  *count = static_cast<size_t>(elements);
  return Status::Ok();
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options)
    : options_(options),
      timeline_(options.rank, "rank " + std::to_string(options.rank)),
      sets_(options.rank),
      owner_(getpid()) {}

Status Runtime::Create(const RuntimeOptions& options, std::unique_ptr<Runtime>* runtime) {
  std::unique_ptr<Runtime> created(new Runtime(options));
  TUTTI_RETURN_IF_ERROR(created->Join());
  *runtime = std::move(created);
  return Status::Ok();
}

Status Runtime::Join() {
  TUTTI_RETURN_IF_ERROR(transport::CreateDevice(options_.data_address, &device_));
  try {
    link_ = std::make_unique<CoordinatorLink>(
        options_.coordinator,
        CoordinatorLink::Callbacks{[this](wire::Execute& e) { OnExecute(e); },
                                   [this](const wire::Refusal& r) { OnTensorRefused(r); },
                                   [this](const wire::Fault& f) { OnFault(f); },
                                   [this](const wire::CommId& c) {
                                     comm_ids_.Put(c.set_id(), c.device_group(), c.id());
                                   },
                                   [this](const Status& s) { OnDead(s); }},
        &counters_, options_.cycle_time, options_.curve);
  } catch (const zmq::error_t& e) {
    return Invalid("cannot use coordinator endpoint '" + options_.coordinator + "': " + e.what());
  }

  wire::Register request;
  request.set_job(options_.job);
  request.set_token(options_.token);
  request.set_rank(options_.rank);
  request.set_size(options_.size);
  request.set_host(options_.host_id);
  request.set_data_endpoint(device_->endpoint());
  request.set_rendezvous_timeout_ms(options_.timeout_ms);
  request.set_cache_capacity(options_.cache_capacity);
  request.set_fusion_threshold(options_.fusion_threshold);
  request.set_stall_warning_ms(options_.stall_warning_ms);
  request.set_stall_shutdown_ms(options_.stall_shutdown_ms);
  request.set_transport(TransportName(options_.transport));
  if (!options_.timeline.empty())
    TUTTI_RETURN_IF_ERROR(timeline_.Start(RankTimelinePath(options_.timeline, options_.rank)));
  for (const auto& set : options_.static_sets)
    request.add_static_sets()->mutable_ranks()->Add(set.begin(), set.end());
  TUTTI_RETURN_IF_ERROR(link_->Register(
      request, transport::Clock::now() + Ms(options_.timeout_ms) + kCoordinatorGrace, &welcome_));

  if (welcome_.job_secret().size() != transport::kJobSecretBytes)
    return Status(Code::kVersionMismatch,
                  "tuttid sent no data-plane secret: it is older than this library (0.3); "
                  "upgrade tuttid");
  device_->SetJobSecret(welcome_.job_secret(), options_.rank);
  TUTTI_RETURN_IF_ERROR(PlanRoutes());
  p2p_ = std::make_unique<PointToPoint>(device_.get(), options_.rank, routes_,
                                        Ms(options_.timeout_ms));
  std::vector<int32_t> world(options_.size);
  for (int32_t r = 0; r < options_.size; ++r) world[r] = r;
  // A lane opens before its set becomes visible: once it is, a submission on it may be answered.
  OpenLane(0, world);
  sets_.Insert(0, world);
  for (const auto& set : welcome_.static_sets()) {
    std::vector<int32_t> ranks(set.ranks().begin(), set.ranks().end());
    if (std::binary_search(ranks.begin(), ranks.end(), options_.rank)) OpenLane(set.id(), ranks);
    sets_.Insert(set.id(), ranks);
  }
  return Status::Ok();
}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
  }
  // Order matters: stop hearing from the coordinator, unblock lanes stuck in the data plane, join
  // them, then fail whatever never reached a lane.
  {
    std::lock_guard<std::mutex> lock(link_mu_);  // a lane may be relaying an NCCL id
    link_.reset();
  }
  if (device_) device_->Shutdown();
  std::map<int32_t, std::unique_ptr<Lane>> lanes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes.swap(lanes_);
  }
  // Device waits do not go through the transport device: stop them too.
  for (auto& [id, lane] : lanes) lane->Interrupt(Status(Code::kShutDown, "the runtime is shutting down"));
  lanes.clear();
  p2p_.reset();
  std::vector<int32_t> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, requests] : pending_) sets.push_back(id);
  }
  for (int32_t id : sets)
    FailPending(id, Status(Code::kShutDown, "the runtime was finalized while the request was pending"));
}

Status Runtime::PlanRoutes() {
  for (const auto& peer : welcome_.peers()) {
    transport::PeerRoute route{peer.data_endpoint(), transport::Link::kTcp};
    const bool same_host = peer.host() == options_.host_id;
    if (peer.rank() == options_.rank) {
      route.link = transport::Link::kNone;
    } else if (options_.transport == TransportMode::kShm && !same_host) {
      return Invalid("TUTTI_TRANSPORT=shm, but rank " + std::to_string(peer.rank()) +
                     " is on another host (" + peer.host() + "): use auto or tcp");
    } else if (options_.transport != TransportMode::kTcp && same_host) {
      route.link = transport::Link::kShm;
    }
    routes_.push_back(std::move(route));
  }
  return Status::Ok();
}

Status Runtime::PeerStats(int32_t set_id, int32_t peer, transport::PeerStats* stats) {
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &members));
  if (!std::binary_search(members.begin(), members.end(), options_.rank))
    return Status(Code::kNotAMember, "rank " + std::to_string(options_.rank) +
                                         " is not a member of process set " + std::to_string(set_id));
  if (peer == options_.rank || !std::binary_search(members.begin(), members.end(), peer))
    return Invalid("rank " + std::to_string(peer) + " is not another member of process set " +
                   std::to_string(set_id));
  std::lock_guard<std::mutex> lock(mu_);
  auto lane = lanes_.find(set_id);
  if (lane == lanes_.end()) return Status(Code::kUnknownSet, "process set " + std::to_string(set_id) + " has no lane");
  *stats = lane->second->PeerStats(peer);
  return Status::Ok();
}

void Runtime::OpenLane(int32_t set_id, const std::vector<int32_t>& ranks) {
  Lane::CommIdRelay relay{
      [this, set_id](int32_t group, const std::string& id) {
        std::lock_guard<std::mutex> lock(link_mu_);
        if (link_) link_->SendCommId(set_id, group, id);
      },
      [this, set_id](int32_t group, gpu::Deadline deadline, const gpu::Interrupt& interrupted,
                     std::string* id) {
        return comm_ids_.Take(set_id, group, deadline, interrupted, id);
      }};
  auto lane = std::make_unique<Lane>(set_id, ranks, options_.rank,
                                     device_->CreateContext(set_id, options_.rank, routes_),
                                     Ms(options_.timeout_ms), &counters_, &timeline_, std::move(relay));
  std::lock_guard<std::mutex> lock(mu_);
  lanes_[set_id] = std::move(lane);
}

Status Runtime::AddProcessSet(std::vector<int32_t> ranks, int64_t timeout_ms, int32_t* set_id) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  wire::Frame frame;
  const uint64_t request_id = link_->NextRequestId();
  frame.mutable_set_add()->set_request_id(request_id);
  frame.mutable_set_add()->mutable_ranks()->Add(ranks.begin(), ranks.end());
  frame.mutable_set_add()->set_timeout_ms(timeout_ms);
  wire::SetReply reply;
  TUTTI_RETURN_IF_ERROR(
      link_->Call(frame, request_id, transport::Clock::now() + Ms(timeout_ms) + kCoordinatorGrace,
                  &reply));
  std::vector<int32_t> members(reply.set().ranks().begin(), reply.set().ranks().end());
  *set_id = reply.set().id();
  const bool member = std::binary_search(members.begin(), members.end(), options_.rank);
  bool has_lane;
  {
    std::lock_guard<std::mutex> lock(mu_);
    has_lane = lanes_.count(*set_id) > 0;
  }
  // The lane first: once the set is visible, a submission on it may be answered at once.
  if (member && !has_lane) OpenLane(*set_id, members);
  sets_.Insert(*set_id, members);
  return Status::Ok();
}

Status Runtime::RemoveProcessSet(int32_t set_id, int64_t timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  if (set_id == 0) return Invalid("the world process set (0) cannot be removed");
  std::vector<int32_t> unused;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &unused));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  wire::Frame frame;
  const uint64_t request_id = link_->NextRequestId();
  frame.mutable_set_remove()->set_request_id(request_id);
  frame.mutable_set_remove()->set_set_id(set_id);
  frame.mutable_set_remove()->set_timeout_ms(timeout_ms);
  wire::SetReply reply;
  TUTTI_RETURN_IF_ERROR(
      link_->Call(frame, request_id, transport::Clock::now() + Ms(timeout_ms) + kCoordinatorGrace,
                  &reply));
  sets_.MarkRemoved(set_id);
  std::unique_ptr<Lane> lane;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lanes_.find(set_id);
    if (it != lanes_.end()) {
      lane = std::move(it->second);
      lanes_.erase(it);
    }
  }
  lane.reset();  // its stream ended: the coordinator released nothing after the removal
  comm_ids_.DropSet(set_id);
  link_->ForgetSet(set_id);
  FailPending(set_id, Status(Code::kSetRemoved, "process set " + std::to_string(set_id) +
                                                    " was removed while the request was pending"));
  return Status::Ok();
}

Status Runtime::Join(int32_t set_id, int64_t timeout_ms, int32_t* last_rank) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(set_id));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
    ++joined_[set_id];  // from now on, collectives of the set run here without a request
  }
  wire::Frame frame;
  const uint64_t request_id = link_->NextRequestId();
  frame.mutable_join()->set_request_id(request_id);
  frame.mutable_join()->set_set_id(set_id);
  frame.mutable_join()->set_timeout_ms(timeout_ms);
  wire::SetReply reply;
  Status status = link_->Call(frame, request_id,
                              transport::Clock::now() + Ms(timeout_ms) + kCoordinatorGrace, &reply);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--joined_[set_id] == 0) joined_.erase(set_id);
  }
  TUTTI_RETURN_IF_ERROR(status);
  *last_rank = reply.set().ranks_size() > 0 ? reply.set().ranks(0) : -1;
  return Status::Ok();
}

Status Runtime::ProcessSetRanks(int32_t set_id, std::vector<int32_t>* ranks) const {
  return sets_.Ranks(set_id, ranks);
}

Status Runtime::Broken(int32_t set_id, const std::vector<int32_t>& members) {
  if (!dead_.ok()) return dead_;
  if (joined_.count(set_id))
    return Invalid("rank " + std::to_string(options_.rank) + " has joined process set " +
                   std::to_string(set_id) + "; it cannot submit there until every member joined");
  auto lane = lanes_.find(set_id);
  if (lane != lanes_.end()) TUTTI_RETURN_IF_ERROR(lane->second->broken());
  for (const auto& [rank, status] : lost_)
    if (std::binary_search(members.begin(), members.end(), rank)) return status;
  return Status::Ok();
}

Status Runtime::Validate(CollectiveArgs& args, const std::vector<int32_t>& members,
                         Request::Operation* op) {
  const std::string label = std::string(wire::KindName(args.kind)) +
                            (args.name.empty() ? "" : " '" + args.name + "'");
  auto invalid = [&](const std::string& why) { return Invalid(label + ": " + why); };
  auto tensor = [&](const char* which, const TensorArgs& t, size_t* count) {
    Status status = CheckTensor(which, t, count);
    return status.ok() ? status : Status(status.code(), label + ": " + status.message());
  };
  if (args.name.size() > 1024) return invalid("name longer than 1024 bytes");
  op->spec.set_kind(args.kind);
  if (args.kind == wire::COLLECTIVE_BARRIER) return Status::Ok();

  TUTTI_RETURN_IF_ERROR(tensor("input", args.input, &op->count));
  const auto dtype = static_cast<DType>(args.input.dtype);
  const bool reduces =
      args.kind == wire::COLLECTIVE_ALLREDUCE || args.kind == wire::COLLECTIVE_REDUCESCATTER;
  if (reduces) {
    if (!IsValidReduceOp(args.reduce_op))
      return invalid("unknown reduce op " + std::to_string(args.reduce_op));
    if (!IsFloating(dtype) && (args.prescale != 1.0 || args.postscale != 1.0))
      return invalid(std::string("prescale and postscale factors apply to floating types only, "
                                 "not ") + DTypeName(args.input.dtype));
    op->spec.set_reduce_op(args.reduce_op);
    op->spec.set_prescale(args.prescale);
    op->spec.set_postscale(args.postscale);
  }
  op->spec.set_priority(args.priority);
  const bool p2p = args.kind == wire::POINT_TO_POINT_SEND || args.kind == wire::POINT_TO_POINT_RECV;
  if (p2p) {
    const char* role = args.kind == wire::POINT_TO_POINT_SEND ? "destination" : "source";
    if (!std::binary_search(members.begin(), members.end(), args.root))
      return invalid(std::string(role) + " rank " + std::to_string(args.root) +
                     " is not a member of process set " + std::to_string(args.set_id));
    if (args.root == options_.rank) return invalid(std::string(role) + " is this rank itself");
    if (args.tag < 0) return invalid("negative tag " + std::to_string(args.tag));
    if (args.input.device_type != TUTTI_DEVICE_TYPE_CPU)
      return Status(Code::kUnsupported,
                    label + ": send and recv of device tensors are not supported yet; copy the "
                            "tensor to host memory first");
    op->output = args.input.data;
  }
  const bool rows = args.kind != wire::COLLECTIVE_ALLREDUCE && args.kind != wire::COLLECTIVE_BROADCAST && !p2p;
  if (rows && args.input.shape.empty())
    return invalid("the input needs at least one dimension (its rows)");
  switch (args.kind) {
    case wire::COLLECTIVE_ALLREDUCE: {
      size_t out_count = 0;
      TUTTI_RETURN_IF_ERROR(tensor("output", args.output, &out_count));
      if (args.input.dtype != args.output.dtype) return invalid("input and output dtypes differ");
      if (DeviceName(args.input) != DeviceName(args.output))
        return invalid("input is on " + DeviceName(args.input) + ", output on " +
                       DeviceName(args.output) + "; both must be on one device");
      if (op->count != out_count)
        return invalid("input has " + std::to_string(op->count) + " elements, output " +
                       std::to_string(out_count));
      op->output = args.output.data;
      break;
    }
    case wire::COLLECTIVE_BROADCAST:
      if (!std::binary_search(members.begin(), members.end(), args.root))
        return invalid("root rank " + std::to_string(args.root) +
                       " is not a member of process set " + std::to_string(args.set_id));
      op->spec.set_root(args.root);
      op->output = args.input.data;
      break;
    case wire::COLLECTIVE_ALLTOALL: {
      const int64_t n = static_cast<int64_t>(members.size()), total = args.input.shape[0];
      std::vector<int64_t> splits;
      if (!args.splits) {
        if (total % n != 0)
          return invalid(std::to_string(total) + " rows do not divide among " + std::to_string(n) +
                         " ranks; give splits");
        splits.assign(n, total / n);
      } else {
        splits = *args.splits;
        if (static_cast<int64_t>(splits.size()) != n)
          return invalid(std::to_string(splits.size()) + " splits for a set of " +
                         std::to_string(n) + " ranks");
        int64_t sum = 0;
        for (int64_t split : splits) {
          if (split < 0) return invalid("negative split " + std::to_string(split));
          sum += split;
        }
        if (sum != total)
          return invalid("splits add up to " + std::to_string(sum) + " rows, the input has " +
                         std::to_string(total));
      }
      op->spec.mutable_splits()->Add(splits.begin(), splits.end());
      break;
    }
    default:
      break;
  }
  op->spec.set_dtype(args.input.dtype);
  op->spec.mutable_shape()->Add(args.input.shape.begin(), args.input.shape.end());
  op->spec.set_device_type(args.input.device_type);
  op->spec.set_device_index(args.input.device_index);
  op->input = args.input.data;
  if (args.input.device_type == TUTTI_DEVICE_TYPE_CUDA) {
    // The producer's point in its stream, now: the collective waits for what was queued before
    // this call and for nothing after it, and the call does not wait for the GPU.
    gpu::Module* module;
    TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
    std::string uuid;
    TUTTI_RETURN_IF_ERROR(module->DeviceUuid(args.input.device_index, &uuid));
    op->spec.set_device_uuid(uuid);
    TUTTI_RETURN_IF_ERROR(module->RecordEvent(args.input.device_index, args.input.stream, &op->ready));
  }
  return Status::Ok();
}

Status Runtime::Submit(CollectiveArgs args, std::shared_ptr<Request>* request) {
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(args.set_id));
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(args.set_id, &members));
  Request::Operation op;
  TUTTI_RETURN_IF_ERROR(Validate(args, members, &op));
  if (args.kind == wire::POINT_TO_POINT_SEND || args.kind == wire::POINT_TO_POINT_RECV) {
    // Between two ranks only: no negotiation, no lane.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shut_down_) return Status(Code::kShutDown, "the runtime is shutting down");
      if (!dead_.ok()) return dead_;
      auto lost = lost_.find(args.root);
      if (lost != lost_.end()) return lost->second;
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
  // Named only once valid: an automatic name consumed by a refused call would put this rank's
  // counter out of step with the others'.
  if (args.name.empty())
    args.name = std::string(wire::KindName(args.kind)) + "." +
                std::to_string(sets_.NextAutoNameIndex(args.set_id));
  op.spec.set_name(args.name);
  auto created = std::make_shared<Request>(op);
  created->result().data.set_allocator(options_.allocator);
  Observe(args.set_id, *created);
  TUTTI_RETURN_IF_ERROR(Enqueue(args.set_id, members, {created}));
  *request = std::move(created);
  return Status::Ok();
}

Status Runtime::Enqueue(int32_t set_id, const std::vector<int32_t>& members,
                        const std::vector<std::shared_ptr<Request>>& requests) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status(Code::kShutDown, "the runtime is shutting down");
    TUTTI_RETURN_IF_ERROR(Broken(set_id, members));
    auto& by_name = pending_[set_id];
    for (const auto& request : requests)
      if (by_name.count(request->name()))
        return Status(Code::kDuplicateName, "a request named '" + request->name() +
                                                "' is already pending on process set " +
                                                std::to_string(set_id));
    for (const auto& request : requests) by_name.emplace(request->name(), request);
  }
  for (const auto& request : requests) {
    if (timeline_.on()) {
      const auto& spec = request->operation().spec;
      timeline_.Begin(set_id, request->name(), request->name(),
                      {{"kind", wire::KindName(spec.kind())}, {"shape", spec.shape()},
                       {"priority", spec.priority()}});
      timeline_.Begin(set_id, request->name(), "NEGOTIATE");
    }
    link_->Announce(set_id, request->operation().spec);
  }
  return Status::Ok();
}

Status Runtime::SubmitGroup(CollectiveArgs args, const std::vector<TensorArgs>& inputs,
                            const std::vector<TensorArgs>& outputs,
                            std::shared_ptr<Request>* request) {
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(args.set_id));
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(args.set_id, &members));
  const std::string kind = std::string("grouped ") + wire::KindName(args.kind);
  std::vector<Request::Operation> ops(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    CollectiveArgs one = args;
    one.name = args.name.empty() ? "" : args.name + "[" + std::to_string(i) + "]";
    one.input = inputs[i];
    if (!outputs.empty()) one.output = outputs[i];
    TUTTI_RETURN_IF_ERROR(Validate(one, members, &ops[i]));
  }
  if (args.name.empty())
    args.name = "grouped_" + std::string(wire::KindName(args.kind)) + "." +
                std::to_string(sets_.NextAutoNameIndex(args.set_id));
  std::vector<std::shared_ptr<Request>> children;
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].spec.set_name(args.name + "[" + std::to_string(i) + "]");
    ops[i].spec.set_group(args.name);
    ops[i].spec.set_group_size(static_cast<int32_t>(ops.size()));
    ops[i].spec.set_group_index(static_cast<int32_t>(i));
    children.push_back(std::make_shared<Request>(ops[i]));
    children.back()->result().data.set_allocator(options_.allocator);
    Observe(args.set_id, *children.back());
  }
  auto group = Request::Group(args.name, args.kind, children);
  TUTTI_RETURN_IF_ERROR(Enqueue(args.set_id, members, children));
  *request = std::move(group);
  return Status::Ok();
}

std::shared_ptr<Request> Runtime::TakePending(int32_t set_id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto set = pending_.find(set_id);
  if (set == pending_.end()) return nullptr;
  auto it = set->second.find(name);
  if (it == set->second.end()) return nullptr;
  auto request = std::move(it->second);
  set->second.erase(it);
  return request;
}

void Runtime::FailPending(int32_t set_id, const Status& status) {
  std::map<std::string, std::shared_ptr<Request>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(set_id);
    if (it == pending_.end()) return;
    failed.swap(it->second);
    pending_.erase(it);
  }
  for (auto& [name, request] : failed) request->Complete(status);
}

void Runtime::Observe(int32_t set_id, Request& request) {
  request.set_observer([this, set_id, name = request.name()](const Status& status) {
    if (timeline_.on())
      timeline_.End(set_id, name, name,
                    {{"status", status.ok() ? std::string("ok") : status.message()}});
  });
}

void Runtime::OnExecute(wire::Execute& execute) {
  const int32_t set_id = execute.set_id();
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
                                response.device_group()});
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
}

void Runtime::OnFault(const wire::Fault& fault) {
  const Status status = wire::ToStatus(fault.error());
  // No rank lost: tuttid itself is going away.
  if (fault.lost_ranks_size() == 0 && status.code() == Code::kCoordinatorLost) return OnDead(status);
  std::vector<int32_t> broken_sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t rank : fault.lost_ranks()) {
      lost_.emplace(rank, status);
      for (auto& [id, lane] : lanes_) {
        if (!std::binary_search(lane->members().begin(), lane->members().end(), rank)) continue;
        lane->Abort(status);  // wakes a ring step blocked on the lost rank
        broken_sets.push_back(id);
      }
    }
  }
  for (int32_t id : broken_sets) FailPending(id, status);
  for (int32_t rank : fault.lost_ranks()) p2p_->AbortPeer(rank, status);
}

void Runtime::Abort() {
  // Peers first: they learn it from tuttid while this rank unwinds.
  link_->SendAbort();
  OnDead(Status(Code::kAborted, "aborted: this rank called tutti_abort"));
}

void Runtime::OnDead(const Status& status) {
  std::vector<int32_t> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return;
    dead_ = status;
    for (auto& [id, lane] : lanes_) lane->Abort(status);
    for (const auto& [id, requests] : pending_) sets.push_back(id);
  }
  if (p2p_) p2p_->AbortAll(status);
  for (int32_t id : sets) FailPending(id, status);
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

Status Runtime::QueryCoordinatorCounters(wire::CoordinatorCounters* counters) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  return link_->QueryCounters(transport::Clock::now() + Ms(options_.timeout_ms), counters);
}

void Runtime::OnTensorRefused(const wire::Refusal& refusal) {
  link_->ForgetTensor(refusal.set_id(), refusal.tensor_name());
  auto request = TakePending(refusal.set_id(), refusal.tensor_name());
  if (request)
    request->Complete(wire::ToStatus(refusal.error()));
}

}  // namespace tutti::client
