// A job taken over by a new HA leader (docs/high-availability.md): the record etcd kept, the
// ranks coming back with Resume, the Executes that catch lagging members up, and the members'
// response caches rebuilt from what they hold. Apart from the rendezvous because nothing of it
// decides anything anew: the job goes on exactly where the old leader left it. Single-threaded,
// like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tutti::server {

JobRecord Job::Record() const {
  JobRecord record;
  record.token_sha256 = TokenHash(token_);
  record.size = first_size_;
  record.membership_epoch = membership_epoch_;
  // An elastic job that re-formed or grew numbers its ranks by slot, in an epoch past its
  // generation: not resumed (yet); its ranks then fail with a clear error instead.
  record.resumable = membership_epoch_ == generation_ && size_ == first_size_;
  record.sets = sets_.Existing();
  record.next_set_id = sets_.next_id();
  return record;
}

void Job::ExpectResume(JobRecord record) { resume_.emplace(ResumeState{std::move(record), {}}); }

Status Job::Resume(const std::string& peer, const wire::Resume& msg, Clock::time_point now,
                   int32_t* slot, Outbox* out) {
  if (welcomed_)
    return Status(Code::kInvalidArgument,
                  fmt::format("job '{}' already resumed; rank {} came too late", id_, msg.slot()));
  if (msg.slot() != msg.register_().rank())
    return Status(Code::kInvalidArgument,
                  fmt::format("resume: slot {} is not rank {}", msg.slot(), msg.register_().rank()));
  resume_->progress[msg.slot()].assign(msg.sets().begin(), msg.sets().end());
  // Only ranks of HA-capable protocols send Resume (DecodeClientFrame): the job's ranks are of one.
  Status status = Register(peer, msg.register_(), wire::kProtocolVersion, now, slot, out);
  if (!status.ok()) resume_->progress.erase(msg.slot());
  return status;
}

void Job::FinishResume(Clock::time_point now, Outbox* out) {
  DecideSettings();
  sets_.Restore(resume_->record.sets, resume_->record.next_set_id);
  size_t replayed = 0;
  for (const auto& [set_id, members] : resume_->record.sets) {
    OpenSet(set_id, members);
    // Where each member is in the set's stream, and the Executes the most advanced one got last.
    const wire::SetProgress* leading = nullptr;
    std::map<int32_t, uint64_t> got;
    for (int32_t member : members) {
      for (const wire::SetProgress& p : resume_->progress[member]) {
        if (p.set_id() != set_id) continue;
        got[member] = p.executes();
        if (!leading || p.executes() > leading->executes()) leading = &p;
      }
    }
    const uint64_t most = leading ? leading->executes() : 0;
    negotiators_.at(set_id).set_next_seq(most);
    if (!leading) continue;
    std::map<uint64_t, wire::Execute> recent;
    for (const std::string& bytes : leading->recent()) {
      wire::Execute execute;
      if (execute.ParseFromString(bytes) && execute.set_id() == set_id)
        recent.emplace(execute.seq(), std::move(execute));
    }
    for (int32_t member : members) {
      for (uint64_t seq = got[member]; seq < most; ++seq) {
        auto it = recent.find(seq);
        if (it == recent.end())
          return RefuseAll(Code::kCoordinatorLost,
                           fmt::format("coordinator lost: job '{}' cannot resume: rank {} lags "
                                       "{} Executes behind in process set {}, more than the "
                                       "others kept",
                                       id_, member, most - got[member], set_id),
                           out);
        out->push_back({peer_of_rank_[member], frames::Execute(it->second)});
        ++replayed;
      }
    }
  }
  welcomed_ = true;
  for (int32_t r = 0; r < size_; ++r) slot_of_claim_[r] = r;
  std::fill(last_seen_.begin(), last_seen_.end(), now);
  const Payload resumed = frames::Resumed();
  for (int32_t r = 0; r < size_; ++r) out->push_back({peer_of_rank_[r], resumed});
  spdlog::info("job '{}': resumed under term {}: {} ranks, {} process sets, {} Executes replayed "
               "to members that lagged",
               id_, frames::Term(), size_, resume_->record.sets.size(), replayed);
  resume_->progress.clear();
  RecordChanged();
}

void Job::CacheState(int32_t rank, const wire::CacheState& msg, Outbox* out) {
  auto it = negotiators_.find(msg.set_id());
  if (it == negotiators_.end()) return;  // removed meanwhile: nothing to rebuild
  const Status status = it->second.RestoreState(rank, msg);
  if (!status.ok()) {
    spdlog::error("job '{}': {}", id_, status.message());
    out->push_back({peer_of_rank_[rank], frames::SetsBroken({msg.set_id()}, status)});
  }
}

void Job::AskToResume(const std::string& leader, uint64_t term, Outbox* out) const {
  const Payload redirect = frames::Redirect(leader, term);
  for (int32_t r = 0; r < size_; ++r)
    if (!peer_of_rank_[r].empty() && state_[r] == RankState::kAlive)
      out->push_back({peer_of_rank_[r], redirect});
}

}  // namespace tutti::server
