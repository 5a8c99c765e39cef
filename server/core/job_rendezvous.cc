// The rendezvous: ranks registering, the checks that they all asked for the same job (static sets,
// transport), and the Welcome that tells each rank its place in the world (local and cross ranks,
// peers, the job's settings). It happens once per job and fixes what the rest of the job runs
// with; apart so that the running job reads without it. Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "server/core/service_metrics.h"

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

Status Job::Register(const std::string& peer, const wire::Register& msg, uint32_t protocol,
                     Clock::time_point now, int32_t* slot, Outbox* out) {
  if (msg.size() != first_size_)
    return Status(Code::kMismatch,
                  fmt::format("rank {} joined job '{}' with world size {}, but the job has size {}",
                              msg.rank(), id_, msg.size(), first_size_));
  // A connection waiting as an early joiner has no slot yet, so the core does not know it as a
  // member: registering it again (as a rank of the rendezvous, say) would give it two slots.
  for (const EarlyJoiner& e : early_)
    if (e.peer == peer) return Status(Code::kInvalidArgument, "this connection already registered");
  // tuttid serves ranks of two protocols (proto/versions.h), but not in one job: the wire protocol
  // is the only version tuttid sees, and ranks of two releases need not agree on the data plane
  // (algorithms, compression) even where the control plane would serve both.
  if (protocol_ == 0) protocol_ = protocol;
  if (protocol != protocol_) {
    const std::string message = fmt::format(
        "protocol versions differ: rank {} speaks protocol {}, the ranks of job '{}' before it "
        "protocol {} (run every rank of a job with one tutti release)",
        msg.rank(), protocol, id_, protocol_);
    // Into a running job, only the newcomer is refused; a rendezvous fails for everyone at once,
    // as it does when static sets or transports differ, rather than when its timeout passes.
    if (!admits_ranks() && !welcomed_ && msg.rank() < first_size_)
      RefuseAll(Code::kMismatch, message, out);
    return Status(Code::kMismatch, message);
  }
  if (admits_ranks()) return RegisterAdded(peer, msg, now, slot, out);
  // A rank to add that came before the job's ranks all did (a launcher scaling up early) waits
  // for the welcome, after which it is registered as added (Welcome).
  if (!welcomed_ && msg.rank() >= first_size_) {
    early_.push_back({peer, msg, now});
    *slot = -1;
    return Status::Ok();
  }
  if (welcomed_)
    return Status(Code::kInvalidArgument,
                  fmt::format("job '{}' already has all its {} ranks", id_, size_));
  if (registrations_[msg.rank()])
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} of job '{}' is already registered", msg.rank(), id_));
  registrations_[msg.rank()] = std::make_unique<wire::Register>(msg);
  // Static sets name O(ranks) ranks and every rank gives them: kept once, not once per rank
  // (O(ranks^2) bytes). A registration that gives other lists keeps its own, for the refusal.
  wire::Register& kept = *registrations_[msg.rank()];
  const std::vector<std::vector<int32_t>> lists = StaticSets(kept);
  if (!static_sets_) static_sets_ = lists;
  if (lists == *static_sets_) {
    // Swapped out rather than cleared: protobuf keeps cleared elements' memory for reuse.
    google::protobuf::RepeatedPtrField<wire::RankList> dropped;
    kept.mutable_static_sets()->Swap(&dropped);
  } else {
    own_static_sets_.insert(msg.rank());
  }
  peer_of_rank_[msg.rank()] = peer;
  *slot = msg.rank();
  if (++registered_ == size_) {
    if (resume_) FinishResume(now, out);
    else Welcome(now, out);
  }
  return Status::Ok();
}

void Job::Welcome(Clock::time_point now, Outbox* out) {
  // Every rank must have given the same static sets; compare each with rank 0's. Those that gave
  // the first registrant's lists were stored without them (Register).
  auto lists_of = [&](int32_t r) {
    return own_static_sets_.count(r) ? StaticSets(*registrations_[r]) : *static_sets_;
  };
  const auto lists = lists_of(0);
  const bool first_own = own_static_sets_.count(0) != 0;
  for (int32_t r = 1; r < size_ && !own_static_sets_.empty(); ++r) {
    if (!first_own && !own_static_sets_.count(r)) continue;  // both gave the first registrant's
    const auto other = lists_of(r);
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
  // Every connection's handshake binds both ends to one setting; a rank protecting its bytes
  // with peers that do not would fail connection by connection, so the job refuses the mix here.
  for (int32_t r = 1; r < size_; ++r)
    if (DataSecurityOf(*registrations_[r]) != DataSecurityOf(*registrations_[0]))
      return RefuseAll(Code::kMismatch,
                       fmt::format("data-plane security differs: rank 0 asked for '{}', rank {} "
                                   "for '{}' (set TUTTI_DATA_SECURITY alike on every rank)",
                                   DataSecurityOf(*registrations_[0]), r,
                                   DataSecurityOf(*registrations_[r])),
                       out);
  std::vector<int32_t> ids;
  Status status = sets_.DefineStatic(lists, &ids);
  if (!status.ok()) return RefuseAll(status.code(), status.message(), out);

  DecideSettings();

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
    DescribePeer(r, base.add_peers());
  }
  FillWelcome(&base);

  // Every rank is told the same peers, sets and settings, encoded once; its placement is its own.
  const Placement place = Place(*world);
  const frames::Welcomes welcomes(base);
  for (int32_t r = 0; r < size_; ++r) {
    wire::Welcome own;
    SetPlacement(place, r, &own);
    out->push_back(welcomes.To(peer_of_rank_[r], own));
  }
  welcomed_ = true;
  RecordChanged();
  for (int32_t r = 0; r < size_; ++r) slot_of_claim_[r] = r;
  if (policy_.metrics) policy_.metrics->JobStarted();
  // Leases start now: a rank that waited long at the rendezvous is not late.
  std::fill(last_seen_.begin(), last_seen_.end(), now);
  spdlog::info("job '{}': all {} ranks joined (membership epoch {})", id_, size_,
               membership_epoch_);
  std::vector<EarlyJoiner> early;
  early.swap(early_);
  for (const EarlyJoiner& e : early) {
    int32_t slot = -1;
    const Status status =
        elastic_.on ? RegisterAdded(e.peer, e.msg, now, &slot, out)
                    : Status(Code::kInvalidArgument,
                             fmt::format("register: rank {} outside [0, {}): job '{}' is not "
                                         "elastic",
                                         e.msg.rank(), first_size_, id_));
    if (status.ok()) late_members_.emplace_back(e.peer, slot);
    else out->push_back({e.peer, frames::Refusal(status)});
  }
}

void Job::DecideSettings() {
  // Fusion and cache sizes: the smallest any rank asked for, so that a rank that disabled them
  // is obeyed. Stall thresholds: rank 0's, else tuttid's.
  fusion_threshold_ = registrations_[0]->fusion_threshold();
  int64_t capacity = registrations_[0]->cache_capacity();
  for (int32_t r = 1; r < size_; ++r) {
    fusion_threshold_ = std::min(fusion_threshold_, registrations_[r]->fusion_threshold());
    capacity = std::min<int64_t>(capacity, registrations_[r]->cache_capacity());
  }
  cache_capacity_ = static_cast<uint32_t>(std::max<int64_t>(capacity, 0));
  // The members' fast path needs the cache, and any rank may turn it off.
  fast_path_ = cache_capacity_ > 0;
  for (int32_t r = 0; r < size_; ++r)
    if (registrations_[r]->no_fast_path()) fast_path_ = false;
  auto threshold = [](int64_t asked, int64_t fallback) {
    const int64_t ms = asked == 0 ? fallback : asked < 0 ? 0 : asked;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(ms));
  };
  stall_warning_ = threshold(registrations_[0]->stall_warning_ms(), policy_.stall_warning_ms);
  stall_shutdown_ = threshold(registrations_[0]->stall_shutdown_ms(), policy_.stall_shutdown_ms);
  const wire::Register& first = *registrations_[0];
  // Autotuning if any rank asks; a parameter any rank pinned stays as the job decided it. The
  // cut-offs: rank 0's pinned values, else the built-in defaults (client/exec/ring_allreduce.h).
  job_tuning_ = {fusion_threshold_, first.small_allreduce_bytes() > 0 ? first.small_allreduce_bytes() : wire::kDefaultSmallAllreduceBytes,
                 first.pipeline_bytes() > 0 ? first.pipeline_bytes() : wire::kDefaultPipelineBytes};
  for (int32_t r = 0; r < size_; ++r) {
    const wire::Register& reg = *registrations_[r];
    autotune_ = autotune_ || reg.autotune();
    autotune_options_.fusion_pinned = autotune_options_.fusion_pinned || reg.fusion_threshold_pinned();
    autotune_options_.small_pinned = autotune_options_.small_pinned || reg.small_allreduce_bytes() > 0;
    autotune_options_.pipeline_pinned = autotune_options_.pipeline_pinned || reg.pipeline_bytes() > 0;
  }
  if (policy_.autotune_trial_releases > 0)
    autotune_options_.trial_releases = policy_.autotune_trial_releases;
  if (policy_.autotune_trial_ms >= 0)
    autotune_options_.trial_duration = std::chrono::milliseconds(policy_.autotune_trial_ms);
  if (policy_.autotune_warmup_releases >= 0)
    autotune_options_.warmup_releases = static_cast<uint64_t>(policy_.autotune_warmup_releases);
  elastic_ = Elastic{first.elastic(), first.min_size(), first.max_size(), first.elastic_timeout_ms()};
}

void Job::DescribePeer(int32_t slot, wire::Peer* peer) const {
  peer->set_rank(slot);
  peer->set_host(registrations_[slot]->host());
  peer->set_data_endpoint(registrations_[slot]->data_endpoint());
}

void Job::FillWelcome(wire::Welcome* welcome) const {
  welcome->set_job_secret(secret_);
  welcome->set_coordinator_epoch(epoch_);
  welcome->set_membership_epoch(membership_epoch_);
  welcome->set_heartbeat_interval_ms(policy_.heartbeat_interval_ms);
  welcome->set_lease_ms(policy_.lease_ms);
  welcome->set_cache_capacity(static_cast<int32_t>(cache_capacity_));
  welcome->set_fusion_threshold(fusion_threshold_);
  welcome->set_small_allreduce_bytes(job_tuning_.small_allreduce_bytes);
  welcome->set_pipeline_bytes(job_tuning_.pipeline_bytes);
}

Job::Placement Job::Place(const std::vector<int32_t>& slots) const {
  // local_rank: position among the ranks of the same host; cross_rank: position among the ranks
  // with the same local_rank (Horovod's definitions).
  // Counted in one pass each (slots are sorted): a rank's position is how many of its group came
  // before it, its size the group's final count.
  const size_t n = slots.size();
  Placement p{std::vector<int32_t>(n), std::vector<int32_t>(n), std::vector<int32_t>(n),
              std::vector<int32_t>(n)};
  std::unordered_map<std::string_view, int32_t> on_host;
  for (size_t r = 0; r < n; ++r) p.local_rank[r] = on_host[registrations_[slots[r]]->host()]++;
  std::unordered_map<int32_t, int32_t> at_local_rank;
  for (size_t r = 0; r < n; ++r) {
    p.local_size[r] = on_host[registrations_[slots[r]]->host()];
    p.cross_rank[r] = at_local_rank[p.local_rank[r]]++;
  }
  for (size_t r = 0; r < n; ++r) p.cross_size[r] = at_local_rank[p.local_rank[r]];
  return p;
}

void Job::RefuseAll(Code code, const std::string& message, Outbox* out) {
  spdlog::warn("job '{}': {}", id_, message);
  for (int32_t r = 0; r < size_; ++r)
    if (!peer_of_rank_[r].empty()) Refuse(r, Status(code, message), 0, "", out);
  for (const EarlyJoiner& e : early_) out->push_back({e.peer, frames::Refusal(Status(code, message))});
  early_.clear();
  failed_ = true;
}

void Job::TimeOutRendezvous(Outbox* out) {
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < size_; ++r)
    if (!registrations_[r]) missing.push_back(r);
  // The first generation is the job as users know it; later ones are named (docs/lifecycle.md).
  if (resume_)
    return RefuseAll(Code::kCoordinatorLost,
                     fmt::format("coordinator lost: job '{}' could not resume under the new HA "
                                 "leader: ranks {} did not come back within {} ms",
                                 id_, FormatRanks(missing), rendezvous_timeout_ms_),
                     out);
  const std::string generation =
      membership_epoch_ > 1 ? fmt::format(" (membership epoch {})", membership_epoch_) : "";
  RefuseAll(Code::kTimeout,
            fmt::format("rendezvous of job '{}'{} timed out after {} ms: {}/{} ranks joined, "
                        "missing {}",
                        id_, generation, rendezvous_timeout_ms_, registered_, size_,
                        FormatRanks(missing)),
            out);
}

}  // namespace tutti::server
