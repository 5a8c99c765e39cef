// The link's calls that wait for an answer: set changes (add, remove, join) and counter queries.
// Each runs on the caller's thread; the I/O thread sends the request and fulfils the promise
// kept in calls_ when the answer with the same request id arrives (link_dispatch.cc).
#include "client/control/coordinator_link.h"

#include "proto/status_codec.h"

namespace tutti::client {

Status CoordinatorLink::Roundtrip(wire::Frame request, uint64_t request_id,
                                  transport::Deadline deadline, wire::Frame* reply) {
  std::future<Answer> answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(Code::kShutDown, "the runtime is shutting down");
    if (!dead_.ok()) return dead_;
    answer = calls_[request_id].get_future();
    outbox_.push_back(Stamp(request));
  }
  Wake();
  if (answer.wait_until(deadline) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(request_id);
    return Status(Code::kCoordinatorLost,
                  "coordinator lost: no answer from " + endpoint_ + " before the deadline");
  }
  Answer answered = answer.get();
  TUTTI_RETURN_IF_ERROR(answered.local);  // the link died meanwhile
  *reply = std::move(answered.frame);
  return Status::Ok();
}

Status CoordinatorLink::SetCall(wire::Frame request, int64_t timeout_ms, wire::SetReply* reply) {
  const uint64_t request_id = next_request_id_++;
  auto stamp = [&](auto* change) {
    change->set_request_id(request_id);
    change->set_timeout_ms(timeout_ms);
  };
  switch (request.body_case()) {
    case wire::Frame::kSetAdd: stamp(request.mutable_set_add()); break;
    case wire::Frame::kSetRemove: stamp(request.mutable_set_remove()); break;
    case wire::Frame::kJoin: stamp(request.mutable_join()); break;
    default: return Status(Code::kInternal, "the coordinator link was asked for an unknown set change");
  }
  wire::Frame answer;
  TUTTI_RETURN_IF_ERROR(Roundtrip(std::move(request), request_id,
                                  transport::Clock::now() + std::chrono::milliseconds(timeout_ms) +
                                      kCoordinatorGrace,
                                  &answer));
  *reply = std::move(*answer.mutable_set_reply());
  return wire::StatusOf(*reply);
}

Status CoordinatorLink::AddSet(const std::vector<int32_t>& ranks, int64_t timeout_ms,
                               int32_t* set_id, std::vector<int32_t>* members) {
  wire::Frame frame;
  frame.mutable_set_add()->mutable_ranks()->Add(ranks.begin(), ranks.end());
  wire::SetReply reply;
  TUTTI_RETURN_IF_ERROR(SetCall(std::move(frame), timeout_ms, &reply));
  *set_id = reply.set().id();
  members->assign(reply.set().ranks().begin(), reply.set().ranks().end());
  return Status::Ok();
}

Status CoordinatorLink::RemoveSet(int32_t set_id, int64_t timeout_ms) {
  wire::Frame frame;
  frame.mutable_set_remove()->set_set_id(set_id);
  wire::SetReply reply;
  return SetCall(std::move(frame), timeout_ms, &reply);
}

Status CoordinatorLink::JoinSet(int32_t set_id, int64_t timeout_ms, int32_t* last_rank) {
  wire::Frame frame;
  frame.mutable_join()->set_set_id(set_id);
  wire::SetReply reply;
  TUTTI_RETURN_IF_ERROR(SetCall(std::move(frame), timeout_ms, &reply));
  *last_rank = reply.last_rank();
  return Status::Ok();
}

Status CoordinatorLink::QueryCounters(transport::Deadline deadline,
                                      wire::CoordinatorCounters* counters, int32_t set_id) {
  wire::Frame request;
  const uint64_t request_id = next_request_id_++;
  request.mutable_counters_query()->set_request_id(request_id);
  request.mutable_counters_query()->set_set_id(set_id);
  wire::Frame answer;
  TUTTI_RETURN_IF_ERROR(Roundtrip(std::move(request), request_id, deadline, &answer));
  *counters = answer.coordinator_counters();
  return Status::Ok();
}

}  // namespace tutti::client
