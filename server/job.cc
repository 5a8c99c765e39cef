#include "server/job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "proto/status_codec.h"
#include "server/fusion.h"
#include "server/message_codec.h"
#include "server/recent_errors.h"
#include "server/service_metrics.h"

namespace tutti::server {
namespace {

std::vector<std::vector<int32_t>> StaticSets(const wire::Register& r) {
  std::vector<std::vector<int32_t>> lists;
  for (const auto& set : r.static_sets()) lists.emplace_back(set.ranks().begin(), set.ranks().end());
  return lists;
}

std::string FormatLists(const std::vector<std::vector<int32_t>>& lists) {
  std::vector<std::string> parts;
  for (const auto& l : lists) parts.push_back(FormatRanks(l));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

}  // namespace

Job::Job(std::string id, std::string token, int32_t size, Clock::time_point rendezvous_deadline,
         int64_t rendezvous_timeout_ms, std::string secret, uint64_t epoch, Policy policy)
    : id_(std::move(id)),
      token_(std::move(token)),
      size_(size),
      rendezvous_deadline_(rendezvous_deadline),
      rendezvous_timeout_ms_(rendezvous_timeout_ms),
      secret_(std::move(secret)),
      epoch_(epoch),
      registrations_(size),
      peer_of_rank_(size),
      state_(size, RankState::kAlive),
      last_seen_(size),
      policy_(policy),
      sets_(size),
      budget_{0, policy.max_pending_tensors, id_} {}

std::vector<std::string> Job::peers() const {
  std::vector<std::string> peers;
  for (const auto& p : peer_of_rank_)
    if (!p.empty()) peers.push_back(p);
  return peers;
}

Status Job::Register(const std::string& peer, const wire::Register& msg, Outbox* out) {
  if (msg.size() != size_)
    return Status(Code::kMismatch,
                  fmt::format("rank {} joined job '{}' with world size {}, but the job has size {}",
                              msg.rank(), id_, msg.size(), size_));
  if (welcomed_)
    return Status(Code::kInvalidArgument,
                  fmt::format("job '{}' already has all its {} ranks", id_, size_));
  if (registrations_[msg.rank()])
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} of job '{}' is already registered", msg.rank(), id_));
  registrations_[msg.rank()] = std::make_unique<wire::Register>(msg);
  peer_of_rank_[msg.rank()] = peer;
  if (++registered_ == size_) Welcome(out);
  return Status::Ok();
}

void Job::Welcome(Outbox* out) {
  // Every rank must have given the same static sets; compare each with rank 0's.
  const auto lists = StaticSets(*registrations_[0]);
  for (int32_t r = 1; r < size_; ++r) {
    const auto other = StaticSets(*registrations_[r]);
    if (other != lists)
      return RefuseAll(Code::kMismatch,
                       fmt::format("static process sets differ: rank 0 gave {}, rank {} gave {}",
                                   FormatLists(lists), r, FormatLists(other)),
                       out);
  }
  // Same-host sets run the shared-memory allreduce only if every member does: its byte stream
  // differs from the TCP ring's, so the data-plane choice must be the job's, not a rank's.
  for (int32_t r = 1; r < size_; ++r)
    if (registrations_[r]->transport() != registrations_[0]->transport())
      return RefuseAll(Code::kMismatch,
                       fmt::format("transports differ: rank 0 asked for '{}', rank {} for '{}' "
                                   "(set TUTTI_TRANSPORT alike on every rank)",
                                   registrations_[0]->transport(), r,
                                   registrations_[r]->transport()),
                       out);
  std::vector<int32_t> ids;
  Status status = sets_.DefineStatic(lists, &ids);
  if (!status.ok()) return RefuseAll(status.code(), status.message(), out);

  // Fusion and cache sizes: the smallest any rank asked for, so that a rank that disabled them
  // is obeyed. Stall thresholds: rank 0's, else tuttid's.
  fusion_threshold_ = registrations_[0]->fusion_threshold();
  int64_t capacity = registrations_[0]->cache_capacity();
  for (int32_t r = 1; r < size_; ++r) {
    fusion_threshold_ = std::min(fusion_threshold_, registrations_[r]->fusion_threshold());
    capacity = std::min<int64_t>(capacity, registrations_[r]->cache_capacity());
  }
  cache_capacity_ = static_cast<uint32_t>(std::max<int64_t>(capacity, 0));
  auto threshold = [](int64_t asked, int64_t fallback) {
    const int64_t ms = asked == 0 ? fallback : asked < 0 ? 0 : asked;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(ms));
  };
  stall_warning_ = threshold(registrations_[0]->stall_warning_ms(), policy_.stall_warning_ms);
  stall_shutdown_ = threshold(registrations_[0]->stall_shutdown_ms(), policy_.stall_shutdown_ms);

  const std::vector<int32_t>* world = nullptr;
  (void)sets_.Members(0, &world);
  OpenSet(0, *world);
  wire::Welcome base;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<int32_t>* ranks = nullptr;
    (void)sets_.Members(ids[i], &ranks);
    OpenSet(ids[i], *ranks);
    auto* set = base.add_static_sets();
    set->set_id(ids[i]);
    set->mutable_ranks()->Add(ranks->begin(), ranks->end());
  }
  for (int32_t r = 0; r < size_; ++r) {
    auto* peer = base.add_peers();
    peer->set_rank(r);
    peer->set_host(registrations_[r]->host());
    peer->set_data_endpoint(registrations_[r]->data_endpoint());
  }
  base.set_job_secret(secret_);
  base.set_coordinator_epoch(epoch_);
  base.set_heartbeat_interval_ms(policy_.heartbeat_interval_ms);
  base.set_lease_ms(policy_.lease_ms);
  base.set_cache_capacity(static_cast<int32_t>(cache_capacity_));

  // local_rank: position among the ranks of the same host; cross_rank: position among the ranks
  // with the same local_rank (Horovod's definitions).
  std::vector<int32_t> local_rank(size_), local_size(size_), cross_rank(size_), cross_size(size_);
  for (int32_t r = 0; r < size_; ++r)
    for (int32_t q = 0; q < size_; ++q)
      if (registrations_[q]->host() == registrations_[r]->host()) {
        local_size[r]++;
        if (q < r) local_rank[r]++;
      }
  for (int32_t r = 0; r < size_; ++r)
    for (int32_t q = 0; q < size_; ++q)
      if (local_rank[q] == local_rank[r]) {
        cross_size[r]++;
        if (q < r) cross_rank[r]++;
      }
  for (int32_t r = 0; r < size_; ++r) {
    Outgoing o{peer_of_rank_[r], {}};
    auto* welcome = o.frame.mutable_welcome();
    *welcome = base;
    welcome->set_local_rank(local_rank[r]);
    welcome->set_local_size(local_size[r]);
    welcome->set_cross_rank(cross_rank[r]);
    welcome->set_cross_size(cross_size[r]);
    out->push_back(std::move(o));
  }
  welcomed_ = true;
  if (policy_.metrics) policy_.metrics->JobStarted();
  // Leases start now: a rank that waited long at the rendezvous is not late.
  std::fill(last_seen_.begin(), last_seen_.end(), Clock::now());
  spdlog::info("job '{}': all {} ranks joined", id_, size_);
}

void Job::OpenSet(int32_t set_id, const std::vector<int32_t>& members) {
  // Host identities tell members that share a GPU apart from members that each have their own.
  std::vector<std::string> hosts;
  hosts.reserve(members.size());
  for (int32_t m : members) hosts.push_back(registrations_[m]->host());
  Negotiator& negotiator =
      negotiators_.emplace(set_id, Negotiator(set_id, members, cache_capacity_, hosts))
          .first->second;
  negotiator.set_job(id_);
  negotiator.set_budget(&budget_);
  negotiator.set_metrics(policy_.metrics);
  if (policy_.timeline == nullptr) return;
  // One track per (job, set) in tuttid's timeline, numbered in order of creation.
  static int32_t next_track = 1;
  const int32_t track = next_track++;
  policy_.timeline->NameTrack(track, fmt::format("job '{}' set {}", id_, set_id));
  negotiator.set_timeline(policy_.timeline, track);
}

void Job::RefuseAll(Code code, const std::string& message, Outbox* out) {
  spdlog::warn("job '{}': {}", id_, message);
  for (int32_t r = 0; r < size_; ++r)
    if (!peer_of_rank_[r].empty()) Refuse(r, Status(code, message), 0, "", out);
  failed_ = true;
}

void Job::Refuse(int32_t rank, const Status& status, int32_t set_id, const std::string& tensor,
                 Outbox* out) {
  if (policy_.metrics) {
    policy_.metrics->Error(status.code());
    if (status.code() == Code::kLimitExceeded) policy_.metrics->Limited("pending_tensors");
  }
  if (policy_.errors) policy_.errors->Add(id_, rank, status);
  Outgoing o{peer_of_rank_[rank], {}};
  auto* refusal = o.frame.mutable_refusal();
  wire::ToWire(status, refusal->mutable_error());
  refusal->set_set_id(set_id);
  refusal->set_tensor_name(tensor);
  out->push_back(std::move(o));
}

void Job::SetAdd(int32_t rank, const wire::SetAdd& msg, Clock::time_point now, Outbox* out) {
  ProcessSetTable::Events events;
  sets_.Add(rank, msg.request_id(), {msg.ranks().begin(), msg.ranks().end()}, msg.timeout_ms(), now,
            &events);
  Apply(events, out);
}

void Job::SetRemove(int32_t rank, const wire::SetRemove& msg, Clock::time_point now, Outbox* out) {
  ProcessSetTable::Events events;
  sets_.Remove(rank, msg.request_id(), msg.set_id(), msg.timeout_ms(), now, &events);
  Apply(events, out);
}

void Job::Apply(ProcessSetTable::Events& events, Outbox* out) {
  for (int32_t id : events.activated) {
    const std::vector<int32_t>* ranks = nullptr;
    (void)sets_.Members(id, &ranks);
    OpenSet(id, *ranks);
    spdlog::info("job '{}': process set {} = {} added", id_, id, FormatRanks(*ranks));
  }
  // Tensors pending on a removed set fail before the members hear that the removal completed, so
  // each member's requests end before its remove call returns.
  for (int32_t id : events.removed) {
    auto it = negotiators_.find(id);
    std::vector<wire::Response> failed;
    it->second.FailPending(
        Status(Code::kSetRemoved, fmt::format("process set {} was removed", id)), &failed);
    if (!failed.empty()) SendExecute(id, it->second, std::move(failed), out);
    negotiators_.erase(it);
    // Joins waiting on the set can never complete now: they fail like its pending tensors (and
    // joins_ keeps only sets that have a negotiator, which Tick and Remove rely on).
    auto waiting = joins_.find(id);
    if (waiting != joins_.end()) {
      const Status removed(Code::kSetRemoved, fmt::format("process set {} was removed", id));
      for (const JoinWaiter& w : waiting->second) ReplyJoin(w, id, removed, -1, out);
      joins_.erase(waiting);
    }
    spdlog::info("job '{}': process set {} removed", id_, id);
  }
  for (auto& reply : events.replies) {
    if (!alive(reply.rank)) continue;
    Outgoing o{peer_of_rank_[reply.rank], {}};
    auto* set_reply = o.frame.mutable_set_reply();
    set_reply->set_request_id(reply.request_id);
    set_reply->mutable_set()->set_id(reply.set_id);
    set_reply->mutable_set()->mutable_ranks()->Add(reply.ranks.begin(), reply.ranks.end());
    if (!reply.status.ok()) wire::ToWire(reply.status, set_reply->mutable_error());
    out->push_back(std::move(o));
  }
}

void Job::Announce(int32_t rank, const wire::Announce& msg, size_t bytes, Clock::time_point now,
                   Outbox* out) {
  counters_.set_announce_messages(counters_.announce_messages() + 1);
  for (const auto& set : msg.sets()) {
    auto it = negotiators_.find(set.set_id());
    std::vector<wire::Response> ready;
    if (it == negotiators_.end()) {
      // Unknown or removed: each full announcement is refused by name (bits name nothing).
      const std::vector<int32_t>* unused = nullptr;
      const Status status = sets_.Members(set.set_id(), &unused);
      if (!status.ok())
        for (const auto& spec : set.tensors()) Refuse(rank, status, set.set_id(), spec.name(), out);
      continue;
    }
    Negotiator& negotiator = it->second;
    counters_.set_tensors_announced(counters_.tensors_announced() + set.tensors_size());
    for (const auto& spec : set.tensors()) {
      Status status = negotiator.Announce(rank, spec, &ready, now);
      if (!status.ok()) Refuse(rank, status, set.set_id(), spec.name(), out);
    }
    // Cache bits: bit i of byte j names slot cached_base + 8j + i.
    const std::string& bits = set.cached();
    // Bits naming empty slots come only from a broken or hostile rank, and a frame can carry
    // millions: one refusal per set and frame, so that answers never outgrow the question.
    bool refused_empty_slot = false;
    for (size_t byte = 0; byte < bits.size(); ++byte)
      for (int bit = 0; bit < 8; ++bit) {
        if (!(static_cast<unsigned char>(bits[byte]) & (1u << bit))) continue;
        const uint32_t slot = set.cached_base() + static_cast<uint32_t>(8 * byte + bit);
        counters_.set_tensors_announced_cached(counters_.tensors_announced_cached() + 1);
        std::string name;  // the tensor's, once the slot names it
        Status status = negotiator.AnnounceCached(rank, slot, &ready, now, &name);
        if (status.ok()) continue;
        if (!name.empty()) {
          Refuse(rank, status, set.set_id(), name, out);
        } else if (!refused_empty_slot) {
          Refuse(rank, status, set.set_id(), fmt::format("#cache-slot-{}", slot), out);
          refused_empty_slot = true;
        }
      }
    // After the bits: a bit sent before the rank applied an eviction still meant the old tensor.
    negotiator.AcknowledgeEvictions(rank, set.evictions_seen());
    auto& held = released_[set.set_id()];
    held.insert(held.end(), std::make_move_iterator(ready.begin()),
                std::make_move_iterator(ready.end()));
    if (held.empty()) released_.erase(set.set_id());
  }
  counters_.set_announce_bytes(counters_.announce_bytes() + bytes);
}

void Job::FlushReleased(Outbox* out) {
  for (auto& [set_id, responses] : released_) {
    auto it = negotiators_.find(set_id);
    if (it != negotiators_.end()) SendExecute(set_id, it->second, std::move(responses), out);
  }
  released_.clear();
}

void Job::ReplyJoin(const JoinWaiter& waiter, int32_t set_id, const Status& status, int32_t last,
                    Outbox* out) {
  if (!alive(waiter.rank)) return;
  Outgoing o{peer_of_rank_[waiter.rank], {}};
  auto* reply = o.frame.mutable_set_reply();
  reply->set_request_id(waiter.request_id);
  reply->mutable_set()->set_id(set_id);
  if (status.ok()) reply->set_last_rank(last);
  else wire::ToWire(status, reply->mutable_error());
  out->push_back(std::move(o));
}

void Job::Join(int32_t rank, const wire::Join& msg, Clock::time_point now, Outbox* out) {
  const JoinWaiter waiter{rank, msg.request_id(), msg.timeout_ms(),
                          now + std::chrono::milliseconds(msg.timeout_ms())};
  auto it = negotiators_.find(msg.set_id());
  Status status;
  if (it == negotiators_.end()) {
    const std::vector<int32_t>* unused = nullptr;
    status = sets_.Members(msg.set_id(), &unused);
  } else if (!it->second.contains(rank)) {
    status = Status(Code::kNotAMember, fmt::format("rank {} is not a member of process set {}",
                                                   rank, msg.set_id()));
  }
  if (!status.ok()) return ReplyJoin(waiter, msg.set_id(), status, -1, out);
  joins_[msg.set_id()].push_back(waiter);
  std::vector<wire::Response> ready;
  int32_t last = -1;
  const bool everyone = it->second.Join(rank, &ready, &last);
  if (!ready.empty()) SendExecute(msg.set_id(), it->second, std::move(ready), out);
  if (!everyone) return;
  for (const JoinWaiter& w : joins_[msg.set_id()]) ReplyJoin(w, msg.set_id(), Status::Ok(), last, out);
  joins_.erase(msg.set_id());
}

void Job::CommId(int32_t rank, const wire::CommId& msg, Outbox* out) {
  const int32_t set_id = msg.set_id();
  auto it = negotiators_.find(set_id);
  Status status;
  if (it == negotiators_.end()) {
    const std::vector<int32_t>* unused = nullptr;
    status = sets_.Members(set_id, &unused);
    status = Status(Code::kUnknownSet, fmt::format("cannot relay rank {}'s NCCL unique id: {}", rank,
                                                   status.ok() ? "no such set" : status.message()));
  } else if (const Negotiator& set = it->second; !set.contains(rank)) {
    status = Status(Code::kNotAMember,
                    fmt::format("rank {} sent the NCCL unique id of process set {}, which it is "
                                "not a member of",
                                rank, set_id));
  } else if (set.members().front() != rank) {
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent the NCCL unique id of process set {}, but only its "
                                "first member (rank {}) generates it",
                                rank, set_id, set.members().front()));
  } else if (msg.device_group() < 0 ||
             static_cast<size_t>(msg.device_group()) >= set.device_groups()) {
    // Groups are numbered when a collective first runs on them, before any member hears of it.
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent the NCCL unique id of device group {} of process set "
                                "{}, {}",
                                rank, msg.device_group(), set_id,
                                set.device_groups() == 0
                                    ? std::string("which has no device groups yet")
                                    : fmt::format("which has device groups 0 to {}",
                                                  set.device_groups() - 1)));
  } else if (msg.id().empty() || msg.id().size() > kMaxCommIdBytes) {
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent an NCCL unique id of {} bytes for process set {}; "
                                "it must have 1 to {} bytes",
                                rank, msg.id().size(), set_id, kMaxCommIdBytes));
  }
  if (!status.ok()) return Refuse(rank, status, set_id, "", out);
  wire::Frame frame;
  *frame.mutable_comm_id() = msg;
  for (int32_t member : it->second.members())
    if (member != rank && alive(member)) out->push_back({peer_of_rank_[member], frame});
}

void Job::SendExecute(int32_t set_id, Negotiator& negotiator, std::vector<wire::Response> responses,
                      Outbox* out) {
  wire::Frame frame;
  auto* execute = frame.mutable_execute();
  execute->set_set_id(set_id);
  ResponseCache& cache = negotiator.cache();
  // A tensor whose slot every member already knows travels as the slot alone; a slot assigned
  // now travels with the spec, and later responses may refer to it.
  auto compact = [&cache](uint32_t slot_plus_one, auto clear) {
    if (slot_plus_one == 0) return;
    const uint32_t slot = slot_plus_one - 1;
    if (cache.Published(slot)) clear();
    else cache.MarkPublished(slot);
  };
  for (auto& response : PlanCollectives(std::move(responses), fusion_threshold_)) {
    if (wire::Failed(response)) {
      const Status status = wire::ToStatus(response.error());
      if (policy_.metrics) policy_.metrics->Error(status.code());
      if (policy_.errors) policy_.errors->Add(id_, -1, status);
    }
    const uint64_t tensors = 1 + static_cast<uint64_t>(response.fused_size());
    counters_.set_collectives_released(counters_.collectives_released() + 1);
    counters_.set_tensors_released(counters_.tensors_released() + tensors);
    if (tensors > 1) counters_.set_tensors_fused(counters_.tensors_fused() + tensors);
    compact(response.cache_slot(), [&] { response.clear_spec(); });
    for (auto& part : *response.mutable_fused())
      compact(part.cache_slot(), [&] { part.clear_name(); });
    *execute->add_responses() = std::move(response);
  }
  for (uint32_t slot : cache.TakeEvicted()) execute->add_cache_evicted(slot);
  counters_.set_cache_evictions(cache.evictions());
  if (execute->responses_size() == 0 && execute->cache_evicted_size() == 0) return;
  execute->set_seq(negotiator.TakeSeq());
  for (int32_t member : negotiator.members())
    if (alive(member)) {
      out->push_back({peer_of_rank_[member], frame});
      counters_.set_execute_messages(counters_.execute_messages() + 1);
    }
}

void Job::Touch(int32_t rank, Clock::time_point now) { last_seen_[rank] = now; }

std::vector<std::pair<std::string, Status>> Job::TakeEvicted() {
  std::vector<std::pair<std::string, Status>> evicted;
  evicted.swap(evicted_);
  return evicted;
}

void Job::Leave(int32_t rank, Outbox* out) {
  Remove(rank, Status(Code::kPeerLost, fmt::format("peer lost: rank {} finalized", rank)),
         /*fault=*/false, out);
  state_[rank] = RankState::kLeft;
}

void Job::Abort(int32_t rank, Outbox* out) {
  const Status status(Code::kAborted, fmt::format("aborted: rank {} called tutti_abort", rank));
  spdlog::warn("job '{}': {}", id_, status.message());
  Remove(rank, status, /*fault=*/true, out);
  evicted_.emplace_back(peer_of_rank_[rank], status);
}

void Job::GoingAway(const Status& status, Outbox* out) const {
  for (int32_t r = 0; r < size_; ++r) {
    if (peer_of_rank_[r].empty() || !alive(r)) continue;
    Outgoing o{peer_of_rank_[r], {}};
    wire::ToWire(status, o.frame.mutable_fault()->mutable_error());  // no lost ranks: tuttid itself
    out->push_back(std::move(o));
  }
}

void Job::Remove(int32_t rank, const Status& status, bool fault, Outbox* out) {
  if (!alive(rank)) return;
  state_[rank] = RankState::kLost;
  ++gone_;
  if (fault && policy_.metrics) policy_.metrics->RankLost();
  if (fault && policy_.errors) policy_.errors->Add(id_, rank, status);
  // The Fault goes first: a rank whose request fails because of the loss must already know of
  // it when it submits again, so that the new request fails at once too.
  for (int32_t r = 0; fault && r < size_; ++r) {
    if (!alive(r)) continue;
    Outgoing o{peer_of_rank_[r], {}};
    o.frame.mutable_fault()->add_lost_ranks(rank);
    wire::ToWire(status, o.frame.mutable_fault()->mutable_error());
    out->push_back(std::move(o));
  }
  for (auto& [id, negotiator] : negotiators_) {
    if (!negotiator.contains(rank)) continue;
    std::vector<wire::Response> failed;
    negotiator.Break(status, &failed);
    if (!failed.empty()) SendExecute(id, negotiator, std::move(failed), out);
  }
  ProcessSetTable::Events events;
  sets_.MarkLost(rank, status, &events);
  Apply(events, out);
  for (auto it = joins_.begin(); it != joins_.end();) {
    if (!negotiators_.at(it->first).contains(rank)) {
      ++it;
      continue;
    }
    for (const JoinWaiter& w : it->second) ReplyJoin(w, it->first, status, -1, out);
    it = joins_.erase(it);
  }
}

void Job::Tick(Clock::time_point now, Outbox* out) {
  if (!welcomed_ && !failed_ && now >= rendezvous_deadline_) {
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < size_; ++r)
      if (!registrations_[r]) missing.push_back(r);
    RefuseAll(Code::kTimeout,
              fmt::format("rendezvous of job '{}' timed out after {} ms: {}/{} ranks joined, "
                          "missing {}",
                          id_, rendezvous_timeout_ms_, registered_, size_, FormatRanks(missing)),
              out);
    return;
  }
  ProcessSetTable::Events events;
  sets_.Expire(now, &events);
  Apply(events, out);
  if (!welcomed_) return;
  InspectStalls(now, out);
  for (auto& [set_id, waiters] : joins_) {
    auto negotiator = negotiators_.find(set_id);
    std::vector<JoinWaiter> kept;
    for (const JoinWaiter& w : waiters) {
      if (w.deadline > now) {
        kept.push_back(w);
        continue;
      }
      std::vector<int32_t> missing;
      for (int32_t m : negotiator->second.members()) {
        bool joined = std::any_of(waiters.begin(), waiters.end(),
                                  [m](const JoinWaiter& j) { return j.rank == m; });
        if (!joined) missing.push_back(m);
      }
      negotiator->second.Unjoin(w.rank);
      ReplyJoin(w, set_id,
                Status(Code::kTimeout, fmt::format("join on process set {} timed out after {} ms: "
                                                   "ranks {} never joined",
                                                   set_id, w.timeout_ms, FormatRanks(missing))),
                -1, out);
    }
    waiters.swap(kept);
  }
  const auto lease = std::chrono::milliseconds(policy_.lease_ms);
  for (int32_t r = 0; r < size_; ++r) {
    if (!alive(r) || now - last_seen_[r] < lease) continue;
    const std::string why = fmt::format("no heartbeat for {} ms", policy_.lease_ms);
    spdlog::warn("job '{}': rank {} lost: {}", id_, r, why);
    Remove(r, Status(Code::kPeerLost, fmt::format("peer lost: rank {}: {}", r, why)),
           /*fault=*/true, out);
    evicted_.emplace_back(peer_of_rank_[r],
                          Status(Code::kEvicted,
                                 fmt::format("evicted: rank {} of job '{}' was declared lost ({}); "
                                             "it can no longer take part in the job",
                                             r, id_, why)));
  }
}

void Job::InspectStalls(Clock::time_point now, Outbox* out) {
  for (auto& [set_id, negotiator] : negotiators_) {
    std::vector<Negotiator::Stall> warned, stalled;
    std::vector<wire::Response> failed;
    negotiator.Inspect(now, stall_warning_, stall_shutdown_, &warned, &stalled, &failed);
    for (const auto& stall : warned)
      spdlog::warn("job '{}': stall on process set {}: ranks {} have not submitted '{}' after {} s "
                   "(submitted by ranks {})",
                   id_, set_id, FormatRanks(stall.missing), stall.name,
                   std::chrono::duration_cast<std::chrono::seconds>(stall.waited).count(),
                   FormatRanks(stall.submitted));
    for (const auto& stall : stalled)
      spdlog::error("job '{}': failing '{}' on process set {} with a stall: ranks {} never "
                    "submitted it",
                    id_, stall.name, set_id, FormatRanks(stall.missing));
    for (size_t i = 0; policy_.metrics && i < warned.size(); ++i) policy_.metrics->StallWarned();
    for (size_t i = 0; policy_.metrics && i < stalled.size(); ++i) policy_.metrics->StallFailed();
    counters_.set_stall_warnings(counters_.stall_warnings() + warned.size());
    counters_.set_stalls_failed(counters_.stalls_failed() + stalled.size());
    if (!failed.empty()) SendExecute(set_id, negotiator, std::move(failed), out);
  }
}

std::optional<Clock::time_point> Job::NextDeadline() const {
  if (!welcomed_) return rendezvous_deadline_;
  std::optional<Clock::time_point> next = sets_.NextDeadline();
  for (const auto& [set_id, negotiator] : negotiators_) {
    auto at = negotiator.NextInspection(stall_warning_, stall_shutdown_);
    if (at && (!next || *at < *next)) next = at;
  }
  for (const auto& [set_id, waiters] : joins_)
    for (const JoinWaiter& w : waiters)
      if (!next || w.deadline < *next) next = w.deadline;
  const auto lease = std::chrono::milliseconds(policy_.lease_ms);
  for (int32_t r = 0; r < size_; ++r)
    if (alive(r) && (!next || last_seen_[r] + lease < *next)) next = last_seen_[r] + lease;
  return next;
}

size_t Job::alive_ranks() const {
  size_t n = 0;
  for (int32_t r = 0; r < size_; ++r)
    if (registrations_[r] && alive(r)) ++n;
  return n;
}

nlohmann::json Job::Describe(Clock::time_point now, size_t pending_per_set) const {
  using nlohmann::json;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  json ranks = json::array();
  for (int32_t r = 0; r < size_; ++r) {
    json rank = {{"rank", r}};
    if (!registrations_[r]) {
      rank["state"] = "missing";
      ranks.push_back(std::move(rank));
      continue;
    }
    // The host identity is "hostname/boot id/netns:inode": the name is what an operator knows.
    const std::string& host = registrations_[r]->host();
    rank["host"] = host.substr(0, host.find('/'));
    rank["host_id"] = host;
    rank["data_endpoint"] = registrations_[r]->data_endpoint();
    rank["state"] = state_[r] == RankState::kAlive ? "alive"
                    : state_[r] == RankState::kLost ? "lost"
                                                    : "left";
    if (welcomed_ && alive(r)) rank["last_seen_seconds"] = seconds(now - last_seen_[r]);
    ranks.push_back(std::move(rank));
  }
  json sets = json::array();
  for (const auto& [set_id, negotiator] : negotiators_) {
    json pending = json::array();
    for (const auto& p : negotiator.Describe(now, pending_per_set))
      pending.push_back({{"name", p.name},
                         {"waited_seconds", seconds(p.waited)},
                         {"submitted", p.submitted},
                         {"missing", p.missing}});
    sets.push_back({{"id", set_id},
                    {"members", negotiator.members()},
                    {"pending_count", negotiator.pending_count()},
                    {"pending", std::move(pending)}});
  }
  return {{"id", id_},
          {"size", size_},
          {"state", failed_ ? "failed" : welcomed_ ? "running" : "rendezvous"},
          {"registered", registered_},
          {"ranks", std::move(ranks)},
          {"process_sets", std::move(sets)},
          {"pending_tensors", budget_.used},
          {"collectives_released", counters_.collectives_released()},
          {"tensors_released", counters_.tensors_released()}};
}

}  // namespace tutti::server
