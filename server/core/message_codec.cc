#include "server/core/message_codec.h"

#include <fmt/format.h>

#include "common/dtype.h"
#include "proto/versions.h"

namespace tutti::server {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// Deadlines are computed as now + milliseconds(ms): beyond kMaxTimeoutMs that could overflow.
Status CheckTimeoutLimit(const char* what, int64_t ms) {
  if (ms <= kMaxTimeoutMs) return Status::Ok();
  return Invalid(fmt::format("{} of {} ms exceeds the limit of {} ms", what, ms, kMaxTimeoutMs));
}

Status ValidateRegister(const wire::Register& r) {
  if (r.job().empty() || r.job().size() > kMaxJobIdBytes)
    return Invalid(fmt::format("register: job id must have 1 to {} bytes", kMaxJobIdBytes));
  if (r.size() < 1 || r.size() > kMaxWorldSize)
    return Invalid(fmt::format("register: world size {} outside [1, {}]", r.size(), kMaxWorldSize));
  // In an elastic job a rank number at or above the size asks to be added to the running job.
  if (r.rank() < 0 || (r.rank() >= r.size() && !r.elastic()))
    return Invalid(fmt::format("register: rank {} outside [0, {})", r.rank(), r.size()));
  if (r.static_sets_size() > kMaxStaticSets)
    return Invalid(fmt::format("register: {} static process sets, at most {}", r.static_sets_size(),
                               kMaxStaticSets));
  for (const auto& set : r.static_sets())
    if (set.ranks_size() > kMaxWorldSize)
      return Invalid(fmt::format("register: a static process set lists {} ranks, at most {}",
                                 set.ranks_size(), kMaxWorldSize));
  if (r.rendezvous_timeout_ms() < 0) return Invalid("register: negative rendezvous timeout");
  TUTTI_RETURN_IF_ERROR(CheckTimeoutLimit("register: rendezvous timeout", r.rendezvous_timeout_ms()));
  // Negative stall thresholds mean off.
  TUTTI_RETURN_IF_ERROR(CheckTimeoutLimit("register: stall warning", r.stall_warning_ms()));
  TUTTI_RETURN_IF_ERROR(CheckTimeoutLimit("register: stall shutdown", r.stall_shutdown_ms()));
  if (r.cache_capacity() < 0 || r.cache_capacity() > kMaxCacheCapacity)
    return Invalid(fmt::format("register: cache capacity {} outside [0, {}]", r.cache_capacity(),
                               kMaxCacheCapacity));
  if (r.fusion_threshold() < 0) return Invalid("register: negative fusion threshold");
  if (r.elastic()) {
    if (r.min_size() < 0 || r.min_size() > r.size())
      return Invalid(fmt::format("register: elastic minimum size {} outside [0, {}]", r.min_size(),
                                 r.size()));
    if (r.elastic_timeout_ms() < 0) return Invalid("register: negative elastic timeout");
    TUTTI_RETURN_IF_ERROR(CheckTimeoutLimit("register: elastic timeout", r.elastic_timeout_ms()));
  }
  // Bounded for every registration, elastic or not: the job keeps rank 0's, and a registration
  // that passed is copied whole into later frames (a Resume repeats it).
  if (r.max_size() < 0 || r.max_size() > kMaxWorldSize)
    return Invalid(fmt::format("register: elastic maximum size {} outside [0, {}]", r.max_size(),
                               kMaxWorldSize));
  return Status::Ok();
}

Status ValidateSetAdd(const wire::SetAdd& a) {
  if (a.ranks_size() < 1 || a.ranks_size() > kMaxWorldSize)
    return Invalid(fmt::format("process set add: {} ranks given", a.ranks_size()));
  if (a.timeout_ms() < 0) return Invalid("process set add: negative timeout");
  return CheckTimeoutLimit("process set add: timeout", a.timeout_ms());
}

Status ValidateAnnounce(const wire::Announce& a) {
  int total = 0;
  for (const auto& set : a.sets()) {
    total += set.tensors_size();
    if (total > kMaxTensorsPerAnnounce)
      return Invalid(fmt::format("announce: more than {} tensors", kMaxTensorsPerAnnounce));
    for (const auto& spec : set.tensors()) TUTTI_RETURN_IF_ERROR(ValidateTensorSpec(spec));
    if (set.cached().size() > static_cast<size_t>(kMaxCacheCapacity) / 8 + 1 ||
        set.cached_base() > static_cast<uint32_t>(kMaxCacheCapacity))
      return Invalid(fmt::format("announce: cache bits beyond the largest capacity, {}",
                                 kMaxCacheCapacity));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateTensorSpec(const wire::TensorSpec& spec) {
  if (spec.name().empty() || spec.name().size() > kMaxNameBytes)
    return Invalid(fmt::format("tensor name must have 1 to {} bytes", kMaxNameBytes));
  if (!wire::CollectiveKind_IsValid(spec.kind()) || spec.kind() == wire::COLLECTIVE_UNSPECIFIED ||
      spec.kind() == wire::POINT_TO_POINT_SEND || spec.kind() == wire::POINT_TO_POINT_RECV)
    return Invalid(fmt::format("tensor '{}': unknown collective kind {}", spec.name(),
                               static_cast<int>(spec.kind())));
  if (spec.kind() == wire::COLLECTIVE_BARRIER) return Status::Ok();  // carries no tensor
  // The device decides the collective's path (negotiator.cc, ChooseDevicePath).
  if (spec.device_type() != 0 && spec.device_type() != 1)
    return Invalid(fmt::format("tensor '{}': unknown device type {}", spec.name(),
                               spec.device_type()));
  if (spec.device_index() < 0)
    return Invalid(fmt::format("tensor '{}': negative device index {}", spec.name(),
                               spec.device_index()));
  if (!spec.device_uuid().empty() && spec.device_uuid().size() != kDeviceUuidBytes)
    return Invalid(fmt::format("tensor '{}': a GPU uuid of {} bytes, not {}", spec.name(),
                               spec.device_uuid().size(), kDeviceUuidBytes));
  if (!IsValidDType(spec.dtype()))
    return Invalid(fmt::format("tensor '{}': unknown dtype {}", spec.name(), spec.dtype()));
  const bool reduces = spec.kind() == wire::COLLECTIVE_ALLREDUCE ||
                       spec.kind() == wire::COLLECTIVE_REDUCESCATTER;
  if (reduces && !IsValidReduceOp(spec.reduce_op()))
    return Invalid(fmt::format("tensor '{}': unknown reduce op {}", spec.name(), spec.reduce_op()));
  if (!spec.group().empty() &&
      (spec.group_size() < 1 || spec.group_size() > kMaxTensorsPerAnnounce ||
       spec.group_index() < 0 || spec.group_index() >= spec.group_size()))
    return Invalid(fmt::format("tensor '{}': group index {} of {}", spec.name(), spec.group_index(),
                               spec.group_size()));
  if (spec.splits_size() > kMaxWorldSize)
    return Invalid(fmt::format("tensor '{}': {} splits", spec.name(), spec.splits_size()));
  for (int64_t split : spec.splits())
    if (split < 0) return Invalid(fmt::format("tensor '{}': negative split {}", spec.name(), split));
  if (spec.shape_size() > kMaxDims)
    return Invalid(fmt::format("tensor '{}': {} dimensions, at most {}", spec.name(),
                               spec.shape_size(), kMaxDims));
  // Bound the element count so byte sizes computed from it never overflow int64. Zero dimensions
  // are left out of the product, so that it bounds every part of the shape too: an allgather's
  // rows (all dimensions but the first) are sized even when the first is 0.
  int64_t elements = 1;
  for (int64_t dim : spec.shape()) {
    if (dim < 0) return Invalid(fmt::format("tensor '{}': negative dimension {}", spec.name(), dim));
    if (dim == 0) continue;
    if (elements > (int64_t{1} << 56) / dim)
      return Invalid(fmt::format("tensor '{}': shape too large", spec.name()));
    elements *= dim;
  }
  return Status::Ok();
}

// A resuming rank hands over at most this many Executes per set (client/control/link_resume.cc
// keeps 8): members lag by at most the Executes one loop turn sent when the leader died.
constexpr int kMaxRecentExecutes = 64;

Status ValidateResume(const wire::Resume& r) {
  Status status = ValidateRegister(r.register_());
  if (!status.ok()) return status;
  if (r.slot() < 0 || r.slot() >= r.register_().size())
    return Invalid(fmt::format("resume: slot {} outside [0, {})", r.slot(), r.register_().size()));
  for (const auto& set : r.sets())
    if (set.recent_size() > kMaxRecentExecutes)
      return Invalid(fmt::format("resume: {} recent Executes for set {} (at most {})",
                                 set.recent_size(), set.set_id(), kMaxRecentExecutes));
  return Status::Ok();
}

Status ValidateCacheState(const wire::CacheState& c) {
  for (const auto& cached : c.slots()) {
    if (cached.slot() >= (1u << 20)) return Invalid(fmt::format("cache state: slot {} too large", cached.slot()));
    Status status = ValidateTensorSpec(cached.spec());
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

Status DecodeClientFrame(const void* data, size_t size, wire::Frame* frame) {
  if (size > static_cast<size_t>(wire::kMaxFrameBytes))
    return Invalid(fmt::format("frame of {} bytes exceeds the limit of {}", size,
                               wire::kMaxFrameBytes));
  if (!frame->ParseFromArray(data, static_cast<int>(size)))
    return Invalid("malformed frame: not a tutti protobuf message");
  if (frame->magic() != wire::kMagic)
    return Invalid(fmt::format("bad magic 0x{:08x}: not a tutti client", frame->magic()));
  // Ranks of the previous protocol are served too (proto/versions.h), so tuttid can be upgraded
  // before the jobs that use it.
  TUTTI_RETURN_IF_ERROR(wire::CheckRankVersion(frame->version()));
  // A rank of a protocol without HA groups cannot send their frames: such a frame is forged or
  // mislabelled, and the HA code must not take it for a rank that can follow a failover.
  if (frame->version() < wire::kFirstHaProtocolVersion &&
      (frame->has_resume() || frame->has_cache_state()))
    return Invalid(fmt::format("frame body {} needs protocol {}; the frame says {}",
                               frame->has_resume() ? "resume" : "cache_state",
                               wire::kFirstHaProtocolVersion, frame->version()));
  switch (frame->body_case()) {
    case wire::Frame::kRegister: return ValidateRegister(frame->register_());
    case wire::Frame::kSetAdd: return ValidateSetAdd(frame->set_add());
    case wire::Frame::kSetRemove:
      if (frame->set_remove().timeout_ms() < 0) return Invalid("process set remove: negative timeout");
      return CheckTimeoutLimit("process set remove: timeout", frame->set_remove().timeout_ms());
    case wire::Frame::kAnnounce: return ValidateAnnounce(frame->announce());
    case wire::Frame::kJoin:
      if (frame->join().timeout_ms() < 0) return Invalid("join: negative timeout");
      return CheckTimeoutLimit("join: timeout", frame->join().timeout_ms());
    case wire::Frame::kResume: return ValidateResume(frame->resume());
    case wire::Frame::kCacheState: return ValidateCacheState(frame->cache_state());
    case wire::Frame::kBye:
    case wire::Frame::kHeartbeat:
    // Checked against its set by the job (Job::CommId), whose refusal names the set.
    case wire::Frame::kCommId:
    case wire::Frame::kCountersQuery:
    case wire::Frame::kAbort:
    case wire::Frame::kProbe:       // the echo of tuttid's probe
    case wire::Frame::kPeerReport:  // checked against the job (Job::PeerReport)
    case wire::Frame::kAtBoundary:
      return Status::Ok();
    case wire::Frame::BODY_NOT_SET: return Invalid("frame has no body");
    default:
      return Invalid(fmt::format("frame body {} is not sent by ranks",
                                 static_cast<int>(frame->body_case())));
  }
}

}  // namespace tutti::server
