#include "server/negotiator.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/dtype.h"
#include "proto/status_codec.h"
#include "server/service_metrics.h"

namespace tutti::server {
namespace {

using wire::KindName;

bool Reduces(wire::CollectiveKind kind) {
  return kind == wire::COLLECTIVE_ALLREDUCE || kind == wire::COLLECTIVE_REDUCESCATTER;
}

// Allgather and alltoall let the first dimension differ between members; the rest must agree.
bool RowsMayDiffer(wire::CollectiveKind kind) {
  return kind == wire::COLLECTIVE_ALLGATHER || kind == wire::COLLECTIVE_ALLTOALL;
}

// Specs agree when every field the collective depends on is equal. The name is the key already.
bool Agree(const wire::TensorSpec& a, const wire::TensorSpec& b) {
  if (a.kind() != b.kind() || a.group() != b.group() || a.group_size() != b.group_size() ||
      a.group_index() != b.group_index())
    return false;
  if (a.kind() == wire::COLLECTIVE_BARRIER) return true;
  const int skip = RowsMayDiffer(a.kind()) ? 1 : 0;
  const bool shapes = a.shape_size() == b.shape_size() &&
                      (a.shape_size() == 0 ||
                       std::equal(a.shape().begin() + skip, a.shape().end(), b.shape().begin() + skip));
  bool reduce = true;
  if (Reduces(a.kind()))
    reduce = a.reduce_op() == b.reduce_op() && a.prescale() == b.prescale() &&
             a.postscale() == b.postscale();
  const bool root = a.kind() != wire::COLLECTIVE_BROADCAST || a.root() == b.root();
  // Not the device: members use different GPU indices, and a set may mix host and device tensors
  // (ChooseDevicePath decides how such a collective runs).
  return a.dtype() == b.dtype() && shapes && reduce && root;
}

constexpr int32_t kCuda = 1;  // TUTTI_DEVICE_CUDA

// "GPU-8f3ac1d2-..." as nvidia-smi -L prints a 16-byte uuid; plain hex for any other length.
std::string FormatUuid(const std::string& uuid) {
  std::string hex;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (uuid.size() == 16 && (i == 4 || i == 6 || i == 8 || i == 10)) hex += '-';
    hex += fmt::format("{:02x}", static_cast<unsigned char>(uuid[i]));
  }
  return "GPU-" + hex;
}

void AppendInt(std::string* key, uint32_t value) {
  key->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void SetError(wire::Response* response, Code code, const std::string& message) {
  wire::ToWire(Status(code, message), response->mutable_error());
}

}  // namespace

std::string DescribeSpec(const wire::TensorSpec& spec) {
  if (spec.kind() == wire::COLLECTIVE_BARRIER) return "barrier";
  std::string text = fmt::format("{} {}[{}]", KindName(spec.kind()), DTypeName(spec.dtype()),
                                 fmt::join(spec.shape(), ", "));
  if (Reduces(spec.kind())) {
    text += fmt::format(" op={}", ReduceOpName(spec.reduce_op()));
    if (spec.prescale() != 1.0) text += fmt::format(" prescale={}", spec.prescale());
    if (spec.postscale() != 1.0) text += fmt::format(" postscale={}", spec.postscale());
  }
  if (spec.kind() == wire::COLLECTIVE_BROADCAST) text += fmt::format(" root={}", spec.root());
  if (!spec.group().empty())
    text += fmt::format(" in group '{}' ({} of {})", spec.group(), spec.group_index() + 1,
                        spec.group_size());
  if (spec.device_type() != 0 || spec.device_index() != 0)
    text += fmt::format(" device={}:{}", spec.device_type() == 0 ? "cpu" : "cuda",
                        spec.device_index());
  return text;
}

Negotiator::Negotiator(int32_t set_id, std::vector<int32_t> members, uint32_t cache_capacity,
                       const std::vector<std::string>& hosts)
    : set_id_(set_id),
      members_(std::move(members)),
      joined_(members_.size(), false),
      cache_(members_.size(), cache_capacity),
      host_of_(members_.size(), 0),
      host_names_(members_.size()) {
  if (hosts.size() != members_.size()) return;  // one host
  std::unordered_map<std::string, uint32_t> first_on;
  for (size_t i = 0; i < members_.size(); ++i) {
    host_of_[i] = first_on.try_emplace(hosts[i], static_cast<uint32_t>(i)).first->second;
    // The identity is "hostname/boot id/netns:inode": the name is what an operator knows.
    host_names_[i] = hosts[i].substr(0, hosts[i].find('/'));
  }
}

size_t Negotiator::IndexOf(int32_t rank) const {
  return static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                             members_.begin());
}

bool Negotiator::Complete(const Pending& pending) const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (!joined_[i] && !pending.by_member[i]) return false;
  return true;
}

bool Negotiator::Join(int32_t rank, std::vector<wire::Response>* ready, int32_t* last_joined) {
  const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                                           members_.begin());
  if (!joined_[index]) {
    joined_[index] = true;
    ++joined_count_;
  }
  // Tensors that only waited for this rank go now, in first-announced order.
  std::vector<std::string> names(pending_order_.begin(), pending_order_.end());
  for (const auto& name : names) {
    auto entry = pending_.find(name);
    if (entry != pending_.end()) ReleaseIfComplete(entry, rank, ready);
  }
  if (joined_count_ < members_.size()) return false;
  *last_joined = rank;
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
  return true;
}

void Negotiator::Unjoin(int32_t rank) {
  const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                                           members_.begin());
  if (index < members_.size() && joined_[index]) {
    joined_[index] = false;
    --joined_count_;
  }
}

bool Negotiator::contains(int32_t rank) const {
  return std::binary_search(members_.begin(), members_.end(), rank);
}

void Negotiator::Break(const Status& status, std::vector<wire::Response>* out) {
  if (!broken_.ok()) return;
  FailPending(status, out);
  broken_ = status;
}

Status Negotiator::AnnounceCached(int32_t rank, uint32_t slot, std::vector<wire::Response>* ready,
                                  Clock::time_point now, std::string* name) {
  if (!broken_.ok()) return broken_;
  if (!contains(rank))
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  const wire::TensorSpec* spec = cache_.Expand(IndexOf(rank), slot);
  if (spec == nullptr)
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} announced response-cache slot {} of process set {}, which "
                              "holds no tensor of it",
                              rank, slot, set_id_));
  if (name) *name = spec->name();
  return Record(rank, *spec, ready, now);
}

void Negotiator::AcknowledgeEvictions(int32_t rank, uint64_t seen) {
  if (contains(rank)) cache_.Acknowledge(IndexOf(rank), seen);
}

Status Negotiator::Announce(int32_t rank, const wire::TensorSpec& spec,
                            std::vector<wire::Response>* ready, Clock::time_point now) {
  if (!broken_.ok()) return broken_;
  auto it = std::lower_bound(members_.begin(), members_.end(), rank);
  if (it == members_.end() || *it != rank)
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  cache_.Observe(static_cast<size_t>(it - members_.begin()), spec);
  return Record(rank, spec, ready, now);
}

Status Negotiator::Record(int32_t rank, const wire::TensorSpec& spec,
                          std::vector<wire::Response>* ready, Clock::time_point now) {
  const size_t index = IndexOf(rank);

  if (!pending_.count(spec.name())) {
    if (pending_.size() >= kMaxPending)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: process set {} already has {} tensors waiting for "
                                "members",
                                set_id_, kMaxPending));
    if (budget_ && budget_->used >= budget_->limit)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: job '{}' already has {} tensors announced by some "
                                "members only (tuttid --max-pending-tensors); '{}' was refused",
                                budget_->job, budget_->limit, spec.name()));
  }
  auto [entry, fresh] = pending_.try_emplace(spec.name());
  Pending& pending = entry->second;
  if (fresh) {
    if (budget_) ++budget_->used;
    pending.by_member.resize(members_.size());
    pending.order = pending_order_.insert(pending_order_.end(), spec.name());
    pending.first_announced = now;
    if (timeline_) timeline_->Begin(track_, spec.name(), "NEGOTIATE", {{"first_rank", rank}});
  }
  if (timeline_) timeline_->Instant(track_, "ANNOUNCED", {{"tensor", spec.name()}, {"rank", rank}});
  if (pending.by_member[index])
    return Status(Code::kDuplicateName,
                  fmt::format("rank {} announced '{}' twice on process set {}", rank, spec.name(),
                              set_id_));
  pending.by_member[index] = spec;
  ReleaseIfComplete(entry, rank, ready);
  return Status::Ok();
}

void Negotiator::ReleaseIfComplete(std::unordered_map<std::string, Pending>::iterator entry,
                                   int32_t last_rank, std::vector<wire::Response>* ready) {
  if (!Complete(entry->second)) return;
  const auto& members = entry->second.by_member;
  wire::Response response = Resolve(entry->first, entry->second);
  response.set_last_rank(last_rank);
  if (timeline_)
    timeline_->End(track_, entry->first, "NEGOTIATE",
                   {{"last_rank", last_rank},
                    {"error", response.has_error() ? response.error().message() : ""}});
  const bool everyone = std::all_of(members.begin(), members.end(),
                                    [](const auto& s) { return s.has_value(); });
  if (!everyone) {
    response.set_partial(true);
  } else if (!wire::Failed(response)) {
    std::vector<const wire::TensorSpec*> specs;
    for (const auto& s : members) specs.push_back(&*s);
    const uint32_t slot = cache_.Assign(specs);
    if (slot != ResponseCache::kNone) response.set_cache_slot(slot + 1);
  }
  if (metrics_) {
    const auto& spec = response.spec();
    uint64_t bytes = IsValidDType(spec.dtype()) ? ElementSize(static_cast<DType>(spec.dtype())) : 0;
    for (int64_t d : spec.shape()) bytes *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    metrics_->Negotiated(spec.kind(), bytes,
                         std::chrono::duration<double>(Clock::now() - entry->second.first_announced)
                             .count());
  }
  if (budget_) --budget_->used;
  pending_order_.erase(entry->second.order);
  pending_.erase(entry);
  Release(std::move(response), ready);
}

void Negotiator::Release(wire::Response response, std::vector<wire::Response>* ready) {
  if (response.spec().group().empty()) {
    ready->push_back(std::move(response));
    return;
  }
  // A group leaves only whole, in index order; one failed tensor fails them all alike.
  const std::string name = response.spec().group();
  const int32_t size = response.spec().group_size();
  auto& group = groups_[name];
  group.push_back(std::move(response));
  if (static_cast<int32_t>(group.size()) < size) return;
  std::sort(group.begin(), group.end(), [](const wire::Response& a, const wire::Response& b) {
    return a.spec().group_index() < b.spec().group_index();
  });
  const wire::Response* failed = nullptr;
  for (const auto& r : group)
    if (wire::Failed(r) && !failed) failed = &r;
  const wire::Error error = failed ? failed->error() : wire::Error();
  for (auto& r : group) {
    if (failed) *r.mutable_error() = error;
    ready->push_back(std::move(r));
  }
  groups_.erase(name);
}

wire::Response Negotiator::Resolve(const std::string& name, const Pending& pending) {
  wire::Response response;
  // Members that joined announced nothing: compare those that did with the first of them.
  size_t reference = 0;
  while (!pending.by_member[reference]) ++reference;
  const wire::TensorSpec& first = *pending.by_member[reference];
  *response.mutable_spec() = first;
  int32_t absent = -1;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!pending.by_member[i]) {
      if (absent < 0) absent = members_[i];
      continue;
    }
    const wire::TensorSpec& other = *pending.by_member[i];
    if (Agree(first, other)) continue;
    SetError(&response, Code::kMismatch,
             fmt::format("mismatched '{}' on process set {}: rank {} sent {}, rank {} sent {}", name,
                         set_id_, members_[reference], DescribeSpec(first), members_[i],
                         DescribeSpec(other)));
    return response;
  }
  const bool supports_join = first.kind() == wire::COLLECTIVE_ALLREDUCE ||
                             first.kind() == wire::COLLECTIVE_ALLGATHER ||
                             first.kind() == wire::COLLECTIVE_BROADCAST ||
                             first.kind() == wire::COLLECTIVE_BARRIER;
  if (absent >= 0 && !supports_join) {
    SetError(&response, Code::kInvalidArgument,
             fmt::format("{} '{}' cannot run on process set {} while rank {} has joined",
                         KindName(first.kind()), name, set_id_, absent));
    return response;
  }
  if (absent >= 0 && first.kind() == wire::COLLECTIVE_BROADCAST && contains(first.root()) &&
      !pending.by_member[std::lower_bound(members_.begin(), members_.end(), first.root()) -
                         members_.begin()]) {
    SetError(&response, Code::kInvalidArgument,
             fmt::format("broadcast '{}': root rank {} has joined and has nothing to send", name,
                         first.root()));
    return response;
  }
  const int n = static_cast<int>(members_.size());
  switch (first.kind()) {
    case wire::COLLECTIVE_BROADCAST:
      if (!contains(first.root()))
        SetError(&response, Code::kInvalidArgument,
                 fmt::format("broadcast '{}': root rank {} is not a member of process set {}", name,
                             first.root(), set_id_));
      break;
    case wire::COLLECTIVE_ALLGATHER:
      for (const auto& spec : pending.by_member)  // a joined member gives no rows
        response.add_member_rows(!spec ? 0 : spec->shape_size() > 0 ? spec->shape(0) : 1);
      break;
    case wire::COLLECTIVE_ALLTOALL:
      for (size_t i = 0; i < members_.size(); ++i) {
        const wire::TensorSpec& spec = *pending.by_member[i];
        if (spec.splits_size() != n) {
          SetError(&response, Code::kInvalidArgument,
                   fmt::format("alltoall '{}': rank {} gave {} splits for a set of {} ranks", name,
                               members_[i], spec.splits_size(), n));
          return response;
        }
        response.mutable_member_rows()->Add(spec.splits().begin(), spec.splits().end());
      }
      break;
    default:
      break;
  }
  if (!response.has_error()) ChooseDevicePath(name, pending, &response);
  return response;
}

void Negotiator::ChooseDevicePath(const std::string& name, const Pending& pending,
                                  wire::Response* response) {
  // Host memory everywhere (or a barrier, which moves no tensor): the CPU transports, group 0.
  if (response->spec().kind() == wire::COLLECTIVE_BARRIER) return;
  const auto& specs = pending.by_member;
  const bool any_device = std::any_of(specs.begin(), specs.end(), [](const auto& s) {
    return s && s->device_type() == kCuda;
  });
  if (!any_device) return;

  // The members' device combination: per member, 'J' (joined), 'H' (host memory), or 'G', its
  // host, GPU index and uuid. Equal combinations share a group (and an NCCL communicator).
  std::string key;
  key.reserve(specs.size() * 26);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i]) {
      key += 'J';
    } else if (specs[i]->device_type() != kCuda) {
      key += 'H';
    } else {
      key += 'G';
      AppendInt(&key, host_of_[i]);
      AppendInt(&key, static_cast<uint32_t>(specs[i]->device_index()));
      key += static_cast<char>(specs[i]->device_uuid().size());
      key += specs[i]->device_uuid();
    }
  }
  auto known = device_groups_.find(key);
  if (known == device_groups_.end()) {
    if (device_groups_.size() >= kMaxDeviceGroups) {
      SetError(response, Code::kLimitExceeded,
               fmt::format("limit exceeded: process set {} may use at most {} device combinations "
                           "(which GPU, or host memory, each member's tensor is on); '{}' would be "
                           "its {}th",
                           set_id_, kMaxDeviceGroups, name, kMaxDeviceGroups + 1));
      return;
    }
    // Why the collective cannot run on NCCL, if it cannot.
    std::string staged;
    auto OnHost = [this](size_t member) {
      return host_names_[member].empty() ? std::string("on one host")
                                         : "on host " + host_names_[member];
    };
    const auto joined = std::find_if(specs.begin(), specs.end(), [](const auto& s) { return !s; });
    const auto on_host = std::find_if(specs.begin(), specs.end(), [](const auto& s) {
      return s && s->device_type() != kCuda;
    });
    const auto on_device = std::find_if(specs.begin(), specs.end(), [](const auto& s) {
      return s && s->device_type() == kCuda;
    });
    if (joined != specs.end()) {
      staged = fmt::format("rank {} has joined, and its share is built in host memory",
                           members_[joined - specs.begin()]);
    } else if (on_host != specs.end()) {
      staged = fmt::format("rank {}'s tensor is in host memory, rank {}'s on cuda:{}",
                           members_[on_host - specs.begin()], members_[on_device - specs.begin()],
                           (*on_device)->device_index());
    } else {
      // Two members share a GPU when they are on one host and their uuids are equal, or, where a
      // uuid is missing, their device indices.
      std::unordered_map<std::string, size_t> by_uuid;  // host + uuid -> first member
      struct ByIndex {
        size_t first;
        std::optional<size_t> first_without_uuid;
      };
      std::map<std::pair<uint32_t, int32_t>, ByIndex> by_index;  // (host, index)
      for (size_t i = 0; i < specs.size() && staged.empty(); ++i) {
        const wire::TensorSpec& spec = *specs[i];
        const bool has_uuid = !spec.device_uuid().empty();
        std::optional<size_t> other;
        if (has_uuid) {
          std::string id;
          AppendInt(&id, host_of_[i]);
          id += spec.device_uuid();
          auto [at, fresh] = by_uuid.try_emplace(std::move(id), i);
          if (!fresh) {
            staged = fmt::format("ranks {} and {} share GPU {} {}", members_[at->second],
                                 members_[i], FormatUuid(spec.device_uuid()), OnHost(i));
            break;
          }
        }
        auto [at, fresh] = by_index.try_emplace({host_of_[i], spec.device_index()}, ByIndex{i, {}});
        if (!fresh) other = has_uuid ? at->second.first_without_uuid : at->second.first;
        if (!has_uuid && !at->second.first_without_uuid) at->second.first_without_uuid = i;
        if (other)
          staged = fmt::format("ranks {} and {} share GPU cuda:{} {}", members_[*other],
                               members_[i], spec.device_index(), OnHost(i));
      }
    }
    const DeviceGroup group{static_cast<int32_t>(device_groups_.size()),
                            staged.empty() ? wire::DEVICE_PATH_NCCL : wire::DEVICE_PATH_STAGED};
    known = device_groups_.emplace(std::move(key), group).first;
    if (!staged.empty())
      spdlog::warn("{}process set {}: '{}' runs staged through host memory: {} (device group {})",
                   job_.empty() ? "" : fmt::format("job '{}': ", job_), set_id_, name, staged,
                   group.index);
  }
  response->set_device_path(known->second.path);
  response->set_device_group(known->second.index);
}

void Negotiator::Inspect(Clock::time_point now, Clock::duration warn_after,
                         Clock::duration fail_after, std::vector<Stall>* warned,
                         std::vector<Stall>* stalled, std::vector<wire::Response>* failed) {
  std::vector<std::string> expired;
  const bool warns = warn_after.count() > 0, fails = fail_after.count() > 0;
  if (!warns && !fails) return;
  const auto youngest = !warns ? fail_after : !fails ? warn_after : std::min(warn_after, fail_after);
  // pending_order_ is oldest first: stop at the first tensor too young for either check.
  for (const std::string& name : pending_order_) {
    Pending& pending = pending_.at(name);
    const auto waited = now - pending.first_announced;
    if (waited < youngest) break;
    const bool warn = warns && !pending.warned && waited >= warn_after;
    const bool fail = fails && waited >= fail_after;
    if (!warn && !fail) continue;
    Stall stall{name, {}, {}, waited};
    for (size_t i = 0; i < members_.size(); ++i)
      (pending.by_member[i] || joined_[i] ? stall.submitted : stall.missing).push_back(members_[i]);
    if (warn) {
      pending.warned = true;
      warned->push_back(stall);
    }
    if (fail) {
      expired.push_back(name);
      stalled->push_back(std::move(stall));
    }
  }
  for (size_t k = 0; k < expired.size(); ++k) {
    const Stall& stall = (*stalled)[stalled->size() - expired.size() + k];
    auto entry = pending_.find(expired[k]);
    wire::Response response;
    // Grouped tensors fail as a whole: say which group, so the held siblings fail alike.
    for (const auto& spec : entry->second.by_member)
      if (spec) {
        *response.mutable_spec() = *spec;
        break;
      }
    response.mutable_spec()->set_name(expired[k]);
    SetError(&response, Code::kStalled,
             fmt::format("stalled: '{}' on process set {} waited {} s for ranks {}, which never "
                         "submitted it",
                         expired[k], set_id_,
                         std::chrono::duration<double>(fail_after).count(),
                         FormatRanks(stall.missing)));
    if (budget_) --budget_->used;
    pending_order_.erase(entry->second.order);
    pending_.erase(entry);
    if (timeline_)
      timeline_->End(track_, expired[k], "NEGOTIATE", {{"error", response.error().message()}});
    const std::string group = response.spec().group();
    if (group.empty()) {
      failed->push_back(std::move(response));
      continue;
    }
    // The group can never be whole now: fail its held siblings alike, and forget its others.
    const wire::Error error = response.error();
    failed->push_back(std::move(response));
    auto held = groups_.find(group);
    if (held != groups_.end()) {
      for (auto& r : held->second) {
        *r.mutable_error() = error;
        failed->push_back(std::move(r));
      }
      groups_.erase(held);
    }
  }
}

std::vector<Negotiator::Stall> Negotiator::Describe(Clock::time_point now, size_t limit) const {
  std::vector<Stall> pending;
  for (const std::string& name : pending_order_) {
    if (pending.size() == limit) break;
    const Pending& p = pending_.at(name);
    Stall stall{name, {}, {}, now - p.first_announced};
    for (size_t i = 0; i < members_.size(); ++i)
      (p.by_member[i] || joined_[i] ? stall.submitted : stall.missing).push_back(members_[i]);
    pending.push_back(std::move(stall));
  }
  return pending;
}

std::optional<Clock::time_point> Negotiator::NextInspection(Clock::duration warn_after,
                                                            Clock::duration fail_after) const {
  if (pending_order_.empty()) return std::nullopt;
  std::optional<Clock::time_point> next;
  if (fail_after.count() > 0) next = pending_.at(pending_order_.front()).first_announced + fail_after;
  if (warn_after.count() > 0)
    for (const std::string& name : pending_order_) {
      const Pending& pending = pending_.at(name);
      if (pending.warned) continue;
      const auto at = pending.first_announced + warn_after;
      if (!next || at < *next) next = at;
      break;
    }
  return next;
}

void Negotiator::FailPending(const Status& status, std::vector<wire::Response>* out) {
  for (const std::string& name : pending_order_) {
    if (timeline_) timeline_->End(track_, name, "NEGOTIATE", {{"error", status.message()}});
    wire::Response response;
    response.mutable_spec()->set_name(name);
    SetError(&response, status.code(),
             fmt::format("{} while '{}' was pending", status.message(), name));
    out->push_back(std::move(response));
  }
  if (budget_) budget_->used -= pending_.size();
  pending_.clear();
  pending_order_.clear();
  for (auto& [name, held] : groups_)
    for (auto& response : held) {
      SetError(&response, status.code(),
               fmt::format("{} while '{}' was pending", status.message(), response.spec().name()));
      out->push_back(std::move(response));
    }
  groups_.clear();
}

}  // namespace tutti::server
