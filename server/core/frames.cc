#include "server/core/frames.h"

#include <atomic>

#include "proto/status_codec.h"

namespace tutti::server::frames {
namespace {

// The HA leader's term (0 outside a group): one per process, since a process runs at most one
// coordinator that is part of a group; set by the event loop, read by the same thread.
std::atomic<uint64_t> g_term{0};

Payload Encoded(wire::Frame& frame) {
  frame.set_term(g_term.load(std::memory_order_relaxed));
  return std::make_shared<const std::string>(wire::Encode(frame));
}

}  // namespace

wire::Frame Decode(const Outgoing& out) {
  wire::Frame frame;
  frame.ParseFromString(*out.frame);
  frame.MergeFromString(out.own);
  return frame;
}

Payload Refusal(const Status& status, int32_t set_id, const std::string& tensor) {
  wire::Frame frame;
  auto* refusal = frame.mutable_refusal();
  wire::ToWire(status, refusal->mutable_error());
  refusal->set_set_id(set_id);
  refusal->set_tensor_name(tensor);
  return Encoded(frame);
}

Payload SetReply(uint64_t request_id, int32_t set_id, const Status& status,
                 const std::vector<int32_t>& members) {
  wire::Frame frame;
  auto* reply = frame.mutable_set_reply();
  reply->set_request_id(request_id);
  reply->mutable_set()->set_id(set_id);
  reply->mutable_set()->mutable_ranks()->Add(members.begin(), members.end());
  if (!status.ok()) wire::ToWire(status, reply->mutable_error());
  return Encoded(frame);
}

Payload JoinReply(uint64_t request_id, int32_t set_id, const Status& status, int32_t last_rank) {
  wire::Frame frame;
  auto* reply = frame.mutable_set_reply();
  reply->set_request_id(request_id);
  reply->mutable_set()->set_id(set_id);
  if (status.ok()) reply->set_last_rank(last_rank);
  else wire::ToWire(status, reply->mutable_error());
  return Encoded(frame);
}

Payload Fault(const std::vector<int32_t>& lost_ranks, const Status& status) {
  wire::Frame frame;
  auto* fault = frame.mutable_fault();
  fault->mutable_lost_ranks()->Add(lost_ranks.begin(), lost_ranks.end());
  wire::ToWire(status, fault->mutable_error());
  return Encoded(frame);
}

Payload SetsBroken(const std::vector<int32_t>& set_ids, const Status& status, bool orderly) {
  wire::Frame frame;
  auto* fault = frame.mutable_fault();
  fault->set_orderly(orderly);
  fault->mutable_broken_sets()->Add(set_ids.begin(), set_ids.end());
  wire::ToWire(status, fault->mutable_error());
  return Encoded(frame);
}

Payload Probe(uint64_t nonce) {
  wire::Frame frame;
  frame.mutable_probe()->set_nonce(nonce);
  return Encoded(frame);
}

Payload RanksWaiting(int32_t count) {
  wire::Frame frame;
  frame.mutable_ranks_waiting()->set_count(count);
  return Encoded(frame);
}

Reformeds::Reformeds(const wire::Reformed& shared) {
  wire::Frame frame;
  *frame.mutable_reformed() = shared;
  shared_ = Encoded(frame);
}

Outgoing Reformeds::To(const std::string& peer, const wire::Reformed& own) const {
  wire::Frame frame;  // only the Reformed field: the envelope is in the shared part already
  *frame.mutable_reformed() = own;
  return Outgoing{peer, shared_, frame.SerializeAsString()};
}

Welcomes::Welcomes(const wire::Welcome& shared) {
  wire::Frame frame;
  *frame.mutable_welcome() = shared;
  shared_ = Encoded(frame);
}

Outgoing Welcomes::To(const std::string& peer, const wire::Welcome& own) const {
  // Only the Welcome field: the envelope is in the shared part already.
  wire::Frame frame;
  *frame.mutable_welcome() = own;
  return Outgoing{peer, shared_, frame.SerializeAsString()};
}

Payload Execute(wire::Execute execute) {
  wire::Frame frame;
  *frame.mutable_execute() = std::move(execute);
  return Encoded(frame);
}

Payload CommId(const wire::CommId& relayed) {
  wire::Frame frame;
  *frame.mutable_comm_id() = relayed;
  return Encoded(frame);
}

Payload Counters(uint64_t request_id, wire::CoordinatorCounters counters) {
  wire::Frame frame;
  *frame.mutable_coordinator_counters() = std::move(counters);
  frame.mutable_coordinator_counters()->set_request_id(request_id);
  return Encoded(frame);
}

void SetTerm(uint64_t term) { g_term.store(term, std::memory_order_relaxed); }
uint64_t Term() { return g_term.load(std::memory_order_relaxed); }

Payload Redirect(const std::string& leader, uint64_t term) {
  wire::Frame frame;
  frame.mutable_redirect()->set_leader(leader);
  frame.mutable_redirect()->set_term(term);
  return Encoded(frame);
}

Payload Resumed() {
  wire::Frame frame;
  frame.mutable_resumed()->set_term(Term());
  return Encoded(frame);
}

Payload Heartbeat() {
  wire::Frame frame;
  frame.mutable_heartbeat();
  return Encoded(frame);
}

}  // namespace tutti::server::frames
