#include "server/core/frames.h"

#include "proto/status_codec.h"

namespace tutti::server::frames {

wire::Frame Refusal(const Status& status, int32_t set_id, const std::string& tensor) {
  wire::Frame frame;
  auto* refusal = frame.mutable_refusal();
  wire::ToWire(status, refusal->mutable_error());
  refusal->set_set_id(set_id);
  refusal->set_tensor_name(tensor);
  return frame;
}

wire::Frame SetReply(uint64_t request_id, int32_t set_id, const Status& status,
                     const std::vector<int32_t>& members) {
  wire::Frame frame;
  auto* reply = frame.mutable_set_reply();
  reply->set_request_id(request_id);
  reply->mutable_set()->set_id(set_id);
  reply->mutable_set()->mutable_ranks()->Add(members.begin(), members.end());
  if (!status.ok()) wire::ToWire(status, reply->mutable_error());
  return frame;
}

wire::Frame JoinReply(uint64_t request_id, int32_t set_id, const Status& status, int32_t last_rank) {
  wire::Frame frame;
  auto* reply = frame.mutable_set_reply();
  reply->set_request_id(request_id);
  reply->mutable_set()->set_id(set_id);
  if (status.ok()) reply->set_last_rank(last_rank);
  else wire::ToWire(status, reply->mutable_error());
  return frame;
}

wire::Frame Fault(const std::vector<int32_t>& lost_ranks, const Status& status) {
  wire::Frame frame;
  auto* fault = frame.mutable_fault();
  fault->mutable_lost_ranks()->Add(lost_ranks.begin(), lost_ranks.end());
  wire::ToWire(status, fault->mutable_error());
  return frame;
}

wire::Frame SetsBroken(const std::vector<int32_t>& set_ids, const Status& status, bool orderly) {
  wire::Frame frame;
  auto* fault = frame.mutable_fault();
  fault->set_orderly(orderly);
  fault->mutable_broken_sets()->Add(set_ids.begin(), set_ids.end());
  wire::ToWire(status, fault->mutable_error());
  return frame;
}

wire::Frame Probe(uint64_t nonce) {
  wire::Frame frame;
  frame.mutable_probe()->set_nonce(nonce);
  return frame;
}

wire::Frame Reformed(wire::Reformed reformed) {
  wire::Frame frame;
  *frame.mutable_reformed() = std::move(reformed);
  return frame;
}

wire::Frame RanksWaiting(int32_t count) {
  wire::Frame frame;
  frame.mutable_ranks_waiting()->set_count(count);
  return frame;
}

wire::Frame Welcome(wire::Welcome welcome) {
  wire::Frame frame;
  *frame.mutable_welcome() = std::move(welcome);
  return frame;
}

wire::Frame Execute(wire::Execute execute) {
  wire::Frame frame;
  *frame.mutable_execute() = std::move(execute);
  return frame;
}

wire::Frame CommId(const wire::CommId& relayed) {
  wire::Frame frame;
  *frame.mutable_comm_id() = relayed;
  return frame;
}

wire::Frame Counters(uint64_t request_id, wire::CoordinatorCounters counters) {
  wire::Frame frame;
  *frame.mutable_coordinator_counters() = std::move(counters);
  frame.mutable_coordinator_counters()->set_request_id(request_id);
  return frame;
}

wire::Frame Heartbeat() {
  wire::Frame frame;
  frame.mutable_heartbeat();
  return frame;
}

}  // namespace tutti::server::frames
