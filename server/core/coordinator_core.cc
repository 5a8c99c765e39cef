#include "server/core/coordinator_core.h"

#include <random>

#include <sodium.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "proto/versions.h"
#include "server/core/frames.h"
#include "server/core/message_codec.h"
#include "server/core/service_metrics.h"
#include "server/security/constant_time.h"

namespace tutti::server {
namespace {

// The job's data-plane secret (transport/handshake.h), from the system's CSPRNG.
std::string NewJobSecret() {
  std::string secret(32, '\0');
  randombytes_buf(secret.data(), secret.size());
  return secret;
}

Outgoing RefusalTo(const std::string& peer, const Status& status) {
  return Outgoing{peer, frames::Refusal(status)};
}

}  // namespace

CoordinatorCore::CoordinatorCore(int64_t default_rendezvous_timeout_ms, uint64_t epoch,
                                 Job::Policy policy, size_t max_jobs)
    : default_rendezvous_timeout_ms_(default_rendezvous_timeout_ms),
      epoch_(epoch),
      policy_(policy),
      max_jobs_(max_jobs) {
  policy_.errors = &errors_;
}

void CoordinatorCore::Refuse(const std::string& peer, const std::string& job, int32_t rank,
                             const Status& status, Outbox* out) {
  if (policy_.metrics) policy_.metrics->Error(status.code());
  errors_.Add(job, rank, status);
  out->push_back(RefusalTo(peer, status));
}

void CoordinatorCore::RefuseLimited(const std::string& limit, const std::string& peer,
                                    const wire::Register& msg, const std::string& message,
                                    Outbox* out) {
  if (policy_.metrics) policy_.metrics->Limited(limit);
  Refuse(peer, msg.job(), msg.rank(), Status(Code::kLimitExceeded, message), out);
}

void CoordinatorCore::HandleFrame(const Source& source, const void* data, size_t size,
                                  Clock::time_point now, Outbox* out) {
  const std::string& peer = source.peer;
  if (policy_.metrics) policy_.metrics->FrameReceived(size);
  if (ha_ && !leading_) {
    // A standby serves nothing: whatever a rank sends, it learns where to go. A rank of a
    // protocol before HA groups would ignore a Redirect and wait: it is told why it cannot stay.
    wire::Frame frame;
    if (frame.ParseFromArray(data, static_cast<int>(size)) && frame.magic() == wire::kMagic &&
        !wire::CheckHaRankVersion(frame.version()).ok())
      return Refuse(peer, "", -1, wire::CheckHaRankVersion(frame.version()), out);
    out->push_back({peer, frames::Redirect(leader_, term_)});
    return;
  }
  wire::Frame frame;
  Status status = DecodeClientFrame(data, size, &frame);
  if (!status.ok()) {
    spdlog::warn("refused a frame of {} bytes: {}", size, status.message());
    auto member = members_.find(peer);
    if (member == members_.end()) Refuse(peer, "", -1, status, out);
    else Refuse(peer, member->second.job, member->second.rank, status, out);
    return;
  }
  auto member = members_.find(peer);
  if (member == members_.end()) {
    auto tombstone = evicted_.find(peer);
    if (tombstone != evicted_.end()) {
      out->push_back(RefusalTo(peer, tombstone->second.status));  // told already: not counted
      return;
    }
    if (frame.epoch() != 0 && frame.epoch() != epoch_) {
      spdlog::warn("refused a rank of epoch {:016x}: this tuttid runs epoch {:016x}", frame.epoch(),
                   epoch_);
      return Refuse(peer, "", -1,
                    Status(Code::kCoordinatorLost,
                           fmt::format("coordinator lost: tuttid restarted (this rank joined epoch "
                                       "{:016x}, tuttid now runs epoch {:016x}); restart the job",
                                       frame.epoch(), epoch_)),
                    out);
    }
    if (frame.has_register_())
      return HandleRegister(source, frame.register_(), frame.version(), now, out);
    if (frame.has_resume()) return HandleResume(source, frame.resume(), now, out);
    // In an HA group this is a rank whose job is resuming here: what it sent before it heard
    // the Redirect that made it resume. Its Resume follows; a refusal would end its link.
    if (ha_) return;
    Refuse(peer, "", -1, Status(Code::kInvalidArgument, "register before sending anything else"),
           out);
    return;
  }
  if (frame.has_resume()) return HandleResume(source, frame.resume(), now, out);
  Job& job = JobOf(member->second);
  const int32_t rank = member->second.rank;
  if (frame.has_register_()) {
    Refuse(peer, job.id(), rank,
           Status(Code::kInvalidArgument, "this connection already registered"), out);
    return;
  }
  job.Touch(rank, now);
  if (!job.welcomed()) {
    Refuse(peer, job.id(), rank,
           Status(Code::kInvalidArgument, "wait for the rendezvous to complete"), out);
    return;
  }
  // Answers to anything but announcements must not overtake the responses announcements released.
  if (!frame.has_announce() && !frame.has_heartbeat() && !frame.has_counters_query())
    job.FlushReleased(out);
  // A set change asked in an elastic job's earlier membership epoch numbered its ranks there.
  const Status stale = job.Stale(frame.membership_epoch(), -1);
  switch (frame.body_case()) {
    case wire::Frame::kSetAdd:
      if (!stale.ok())
        out->push_back({peer, frames::SetReply(frame.set_add().request_id(), -1, stale, {})});
      else
        job.SetAdd(rank, frame.set_add(), now, out);
      break;
    case wire::Frame::kSetRemove:
      if (!stale.ok())
        out->push_back({peer, frames::SetReply(frame.set_remove().request_id(),
                                               frame.set_remove().set_id(), stale, {})});
      else
        job.SetRemove(rank, frame.set_remove(), now, out);
      break;
    case wire::Frame::kAnnounce:
      job.Announce(rank, frame.announce(), size, frame.membership_epoch(), now, out);
      break;
    case wire::Frame::kPeerReport: job.PeerReport(rank, frame.peer_report(), now, out); break;
    case wire::Frame::kProbe: job.ProbeAnswered(rank, frame.probe(), out); break;
    case wire::Frame::kAtBoundary: job.AtBoundary(rank, frame.membership_epoch(), now, out); break;
    case wire::Frame::kCountersQuery:
      out->push_back({peer, frames::Counters(frame.counters_query().request_id(),
                                            job.counters(frame.counters_query().set_id()))});
      break;
    case wire::Frame::kHeartbeat:
      // A rank sends one per interval and needs one back per lease; more are not answered.
      if (member->second.echoed == Clock::time_point{} ||
          now - member->second.echoed >= std::chrono::milliseconds(policy_.heartbeat_interval_ms) / 2) {
        member->second.echoed = now;
        out->push_back({peer, frames::Heartbeat()});
      }
      break;
    case wire::Frame::kJoin:
      if (!stale.ok())
        out->push_back({peer, frames::JoinReply(frame.join().request_id(), frame.join().set_id(),
                                                stale, -1)});
      else
        job.Join(rank, frame.join(), now, out);
      break;
    case wire::Frame::kCommId: job.CommId(rank, frame.comm_id(), out); break;
    case wire::Frame::kCacheState: job.CacheState(rank, frame.cache_state(), out); break;
    case wire::Frame::kAbort:
      job.Abort(rank, now, out);
      CollectEvicted(job);
      // The last live rank aborted: no Bye or lease will end the job later.
      if (job.everyone_left()) DropJob(job.id(), job.generation());
      break;
    case wire::Frame::kBye:
      // Only welcomed ranks say Bye (a rank whose registration failed has nothing to leave).
      job.Leave(rank, now, out);
      members_.erase(member);
      if (job.everyone_left()) {
        spdlog::info("job '{}': all ranks left membership epoch {}", job.id(),
                     job.membership_epoch());
        DropJob(job.id(), job.generation());
      }
      break;
    default: break;  // DecodeClientFrame admits nothing else
  }
}

void CoordinatorCore::HandleRegister(const Source& source, const wire::Register& msg,
                                     uint32_t protocol, Clock::time_point now, Outbox* out) {
  const std::string& peer = source.peer;
  if (Status ha = wire::CheckHaRankVersion(protocol); ha_ && !ha.ok())
    return Refuse(peer, msg.job(), msg.rank(), ha, out);
  if (keys_) {
    // CURVE: the ZAP handler admitted the key; it may register only as a rank it is listed for.
    auto listed = keys_->clients.find(source.key);
    const JobRank claimed{msg.job(), msg.rank()};
    if (listed == keys_->clients.end() ||
        std::find(listed->second.begin(), listed->second.end(), claimed) == listed->second.end()) {
      std::string holder = "no rank";
      if (listed != keys_->clients.end() && !listed->second.empty())
        holder = fmt::format("rank {} of job '{}'", listed->second[0].rank, listed->second[0].job);
      spdlog::warn("refused a registration as rank {} of job '{}' from {}: its CURVE key is {}'s",
                   msg.rank(), msg.job(), source.address, holder);
      return Refuse(peer, msg.job(), msg.rank(),
                    Status(Code::kAuthFailed,
                           fmt::format("authentication failed: this rank's CURVE key is not listed "
                                       "for rank {} of job '{}' in tuttid's client keys (it "
                                       "belongs to {})",
                                       msg.rank(), msg.job(), holder)),
                    out);
    }
  }
  if (!registrations_.Allow(source.address, now))
    return RefuseLimited("registrations_per_address", peer, msg,
                         fmt::format("limit exceeded: too many registrations from {} (at most {} "
                                     "a second, tuttid --max-registrations-per-second); retry later",
                                     source.address, registrations_.rate()),
                         out);
  auto it = jobs_.find(msg.job());
  if (it == jobs_.end() && jobs_.size() >= max_jobs_) {
    spdlog::warn("refused job '{}': already serving {} jobs", msg.job(), jobs_.size());
    return RefuseLimited(
        "jobs", peer, msg,
        fmt::format("limit exceeded: tuttid already serves {} jobs, its limit (--max-jobs)",
                    max_jobs_),
        out);
  }
  if (it == jobs_.end() &&
      (rendezvous_jobs_per_address_ != SIZE_MAX || rendezvous_ranks_per_address_ != SIZE_MAX)) {
    size_t waiting = 0, ranks = 0;
    ForEachJob([&](const Job& job) {
      auto address = job_address_.find(job.id());
      if (!job.welcomed() && address != job_address_.end() && address->second == source.address) {
        ++waiting;
        ranks += static_cast<size_t>(job.size());
      }
    });
    if (ranks + static_cast<size_t>(msg.size()) > rendezvous_ranks_per_address_)
      return RefuseLimited("rendezvous_ranks_per_address", peer, msg,
                           fmt::format("limit exceeded: jobs started from {} already wait for {} "
                                       "ranks, and a job of {} more would pass tuttid's limit of "
                                       "{} (--max-rendezvous-ranks-per-address)",
                                       source.address, ranks, msg.size(),
                                       rendezvous_ranks_per_address_),
                           out);
    if (waiting >= rendezvous_jobs_per_address_)
      return RefuseLimited("rendezvous_jobs_per_address", peer, msg,
                           fmt::format("limit exceeded: {} already started {} jobs whose ranks "
                                       "have not all joined (tuttid "
                                       "--max-rendezvous-jobs-per-address)",
                                       source.address, waiting),
                           out);
  }
  // Which generation the registration joins: the newest while its rendezvous runs; the next one
  // when the newest is running and this rank has left it (it finalized and initializes again);
  // the newest otherwise, which refuses a second registration of a live rank.
  Job* job = nullptr;
  if (it != jobs_.end()) {
    Job& newest = *it->second.rbegin()->second;
    if (!SameSecret(newest.token(), msg.token())) {
      spdlog::warn("job '{}': rank {} presented a wrong token", msg.job(), msg.rank());
      Refuse(peer, msg.job(), msg.rank(),
             Status(Code::kAuthFailed, fmt::format("wrong token for job '{}'", msg.job())), out);
      return;
    }
    // A running elastic job takes the registration as an added rank (Job::Register).
    if (newest.admits_ranks() || !newest.rank_gone(msg.rank())) job = &newest;
  }
  if (!job) {
    uint64_t membership_epoch = msg.last_membership_epoch() + 1;
    if (it != jobs_.end())
      membership_epoch =
          std::max(membership_epoch, it->second.rbegin()->second->membership_epoch() + 1);
    const int64_t timeout = msg.rendezvous_timeout_ms() > 0 ? msg.rendezvous_timeout_ms()
                                                            : default_rendezvous_timeout_ms_;
    auto created = std::make_unique<Job>(msg.job(), membership_epoch, msg.token(), msg.size(),
                                         now + std::chrono::milliseconds(timeout), timeout,
                                         NewJobSecret(), epoch_, policy_);
    job = created.get();
    if (it == jobs_.end()) {
      it = jobs_.emplace(msg.job(), Generations{}).first;
      job_address_[msg.job()] = source.address;
    }
    it->second.emplace(membership_epoch, std::move(created));
    spdlog::info("job '{}': created by rank {}, waiting for {} ranks (membership epoch {})",
                 msg.job(), msg.rank(), msg.size(), membership_epoch);
  }
  int32_t slot = -1;
  Status status = job->Register(peer, msg, protocol, now, &slot, out);
  if (!status.ok()) {
    Refuse(peer, msg.job(), msg.rank(), status, out);
    // A generation this registration created and could not join holds no one; one it failed
    // (ranks of two protocols) told its ranks.
    if (job->peers().empty() || job->failed()) DropJob(msg.job(), job->generation());
    return;
  }
  if (slot >= 0) members_[peer] = Member{msg.job(), job->generation(), slot};
  for (const auto& [late, late_slot] : job->TakeLateMembers())
    members_[late] = Member{msg.job(), job->generation(), late_slot};
  if (job->failed()) DropJob(msg.job(), job->generation());
}

void CoordinatorCore::Unreachable(const std::string& peer) {
  auto member = members_.find(peer);
  if (member == members_.end()) return;
  JobOf(member->second).ConnectionClosed(member->second.rank);
}

void CoordinatorCore::CheckConnections(Outbox* out) const {
  ForEachJob([&](const Job& job) { job.CheckConnections(out); });
}

void CoordinatorCore::DropJob(std::string id, uint64_t key) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  auto generation = it->second.find(key);
  if (generation == it->second.end()) return;
  for (const std::string& peer : generation->second->peers()) {
    auto member = members_.find(peer);
    if (member != members_.end() && member->second.generation == key)
      members_.erase(member);
  }
  // Tombstones outlive the generation: a rank frozen past the end of its job still learns that
  // it was evicted when it wakes (CollectEvicted bounds how many are kept).
  it->second.erase(generation);  // `id` is a copy: it may have been the job's own id()
  if (ha_) changed_records_.insert(id);  // its record goes once no generation runs
  if (it->second.empty()) {
    job_address_.erase(id);
    jobs_.erase(it);
    if (policy_.metrics) policy_.metrics->sets().ForgetJob(id);  // its negotiators are gone
  }
}

void CoordinatorCore::CollectEvicted(Job& job) {
  for (auto& [peer, status] : job.TakeEvicted()) {
    members_.erase(peer);
    if (evicted_.insert_or_assign(peer, Tombstone{job.id(), job.generation(), std::move(status)})
            .second)
      evicted_order_.push_back(peer);
    while (evicted_order_.size() > kMaxTombstones) {
      evicted_.erase(evicted_order_.front());
      evicted_order_.pop_front();
    }
  }
}

void CoordinatorCore::Flush(Outbox* out) {
  ForEachJob([&](Job& job) {
    if (job.has_released()) job.FlushReleased(out);
  });
}

void CoordinatorCore::GoingAway(Outbox* out) const {
  const Status status(Code::kCoordinatorLost, "coordinator lost: tuttid is stopping");
  ForEachJob([&](const Job& job) { job.GoingAway(status, out); });
}

void CoordinatorCore::Tick(Clock::time_point now, Outbox* out) {
  std::vector<std::pair<std::string, uint64_t>> failed;
  ForEachJob([&](Job& job) {
    auto deadline = job.NextDeadline();
    if (!deadline || *deadline > now) return;
    job.Tick(now, out);
    CollectEvicted(job);
    if (job.failed() || job.everyone_left()) failed.emplace_back(job.id(), job.generation());
  });
  for (const auto& [id, key] : failed) DropJob(id, key);
}

std::optional<Clock::time_point> CoordinatorCore::NextDeadline() const {
  std::optional<Clock::time_point> next;
  ForEachJob([&](const Job& job) {
    auto deadline = job.NextDeadline();
    if (deadline && (!next || *deadline < *next)) next = deadline;
  });
  return next;
}

nlohmann::json CoordinatorCore::Describe(Clock::time_point now) const {
  // Enough pending tensors per set to see what a stall waits for, bounded for a flooding job.
  constexpr size_t kPendingShown = 50;
  nlohmann::json jobs = nlohmann::json::array();
  ForEachJob([&](const Job& job) { jobs.push_back(job.Describe(now, kPendingShown)); });
  return {{"epoch", fmt::format("{:016x}", epoch_)},
          {"jobs", std::move(jobs)},
          {"recent_errors", errors_.ToJson()}};
}

void CoordinatorCore::UpdateGauges() const {
  if (!policy_.metrics) return;
  size_t ranks = 0, sets = 0, pending = 0;
  ForEachJob([&](const Job& job) {
    ranks += job.alive_ranks();
    sets += job.active_sets();
    pending += job.pending_tensors();
  });
  policy_.metrics->SetJobs(jobs_.size());
  policy_.metrics->SetRanks(ranks);
  policy_.metrics->SetProcessSets(sets);
  policy_.metrics->SetPendingTensors(pending);
}

}  // namespace tutti::server
