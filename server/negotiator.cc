#include "server/negotiator.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/dtype.h"

namespace tutti::server {
namespace {

const char* KindName(wire::CollectiveKind kind) {
  switch (kind) {
    case wire::COLLECTIVE_ALLREDUCE: return "allreduce";
    default: return "collective";
  }
}

// Specs agree when every field the collective depends on is equal. The name is the key already.
bool Agree(const wire::TensorSpec& a, const wire::TensorSpec& b) {
  return a.kind() == b.kind() && a.dtype() == b.dtype() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()) &&
         a.reduce_op() == b.reduce_op() && a.prescale() == b.prescale() &&
         a.postscale() == b.postscale() && a.device_type() == b.device_type() &&
         a.device_index() == b.device_index() && a.root() == b.root();
}

void SetError(wire::Response* response, Code code, const std::string& message) {
  response->mutable_error()->set_code(static_cast<int32_t>(code));
  response->mutable_error()->set_message(message);
}

}  // namespace

std::string DescribeSpec(const wire::TensorSpec& spec) {
  std::string text = fmt::format("{} {}[{}] op={}", KindName(spec.kind()), DTypeName(spec.dtype()),
                                 fmt::join(spec.shape(), ", "), ReduceOpName(spec.reduce_op()));
  if (spec.prescale() != 1.0) text += fmt::format(" prescale={}", spec.prescale());
  if (spec.postscale() != 1.0) text += fmt::format(" postscale={}", spec.postscale());
  if (spec.device_type() != 0 || spec.device_index() != 0)
    text += fmt::format(" device={}:{}", spec.device_type() == 0 ? "cpu" : "cuda",
                        spec.device_index());
  return text;
}

Negotiator::Negotiator(int32_t set_id, std::vector<int32_t> members)
    : set_id_(set_id), members_(std::move(members)) {}

bool Negotiator::contains(int32_t rank) const {
  return std::binary_search(members_.begin(), members_.end(), rank);
}

void Negotiator::Break(const Status& status, std::vector<wire::Response>* out) {
  if (!broken_.ok()) return;
  FailPending(status, out);
  broken_ = status;
}

Status Negotiator::Announce(int32_t rank, const wire::TensorSpec& spec,
                            std::vector<wire::Response>* ready) {
  if (!broken_.ok()) return broken_;
  auto it = std::lower_bound(members_.begin(), members_.end(), rank);
  if (it == members_.end() || *it != rank)
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  const size_t index = static_cast<size_t>(it - members_.begin());

  if (pending_.size() >= kMaxPending && !pending_.count(spec.name()))
    return Status(Code::kInvalidArgument,
                  fmt::format("process set {} already has {} tensors waiting for members", set_id_,
                              kMaxPending));
  auto [entry, fresh] = pending_.try_emplace(spec.name());
  Pending& pending = entry->second;
  if (fresh) {
    pending.by_member.resize(members_.size());
    pending.order = pending_order_.insert(pending_order_.end(), spec.name());
  }
  if (pending.by_member[index])
    return Status(Code::kDuplicateName,
                  fmt::format("rank {} announced '{}' twice on process set {}", rank, spec.name(),
                              set_id_));
  pending.by_member[index] = spec;
  if (++pending.count < members_.size()) return Status::Ok();

  ready->push_back(Resolve(spec.name(), pending));
  pending_order_.erase(pending.order);
  pending_.erase(entry);
  return Status::Ok();
}

wire::Response Negotiator::Resolve(const std::string& name, const Pending& pending) const {
  wire::Response response;
  const wire::TensorSpec& first = *pending.by_member[0];
  *response.mutable_spec() = first;
  for (size_t i = 1; i < members_.size(); ++i) {
    const wire::TensorSpec& other = *pending.by_member[i];
    if (Agree(first, other)) continue;
    SetError(&response, Code::kMismatch,
             fmt::format("mismatched '{}' on process set {}: rank {} sent {}, rank {} sent {}", name,
                         set_id_, members_[0], DescribeSpec(first), members_[i],
                         DescribeSpec(other)));
    break;
  }
  return response;
}

void Negotiator::FailPending(const Status& status, std::vector<wire::Response>* out) {
  for (const std::string& name : pending_order_) {
    wire::Response response;
    response.mutable_spec()->set_name(name);
    SetError(&response, status.code(),
             fmt::format("{} while '{}' was pending", status.message(), name));
    out->push_back(std::move(response));
  }
  pending_.clear();
  pending_order_.clear();
}

}  // namespace tutti::server
