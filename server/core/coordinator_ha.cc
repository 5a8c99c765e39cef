// The core's part in an HA group (docs/high-availability.md): standbys redirect every frame, a
// new leader takes jobs back from their ranks' Resume frames and the records etcd kept, and the
// records of the jobs it serves are handed to the service to write. Socket-free and
// single-threaded like the rest of the core: the service's HA thread talks to etcd.
#include "server/core/coordinator_core.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/core/frames.h"
#include "server/core/service_metrics.h"
#include "server/security/constant_time.h"

namespace tutti::server {

void CoordinatorCore::EnableHa(std::function<bool()> may_release) {
  ha_ = true;
  policy_.may_release = std::move(may_release);
  policy_.changed_records = &changed_records_;
}

void CoordinatorCore::SetRole(bool leading, const std::string& self_or_leader, uint64_t term) {
  const bool was_leading = leading_;
  leading_ = leading;
  leader_ = self_or_leader;
  term_ = term;
  if (leading) frames::SetTerm(term);
  if (!was_leading || leading) return;
  // Stepped down: another instance leads, and the ranks of these jobs resume there (or already
  // did). Telling them anything would only race the new leader.
  spdlog::warn("no longer leading: forgetting {} jobs, whose ranks resume with the new leader",
               jobs_.size());
  for (const auto& [id, generations] : jobs_)
    if (policy_.metrics) policy_.metrics->sets().ForgetJob(id);
  jobs_.clear();
  job_address_.clear();
  members_.clear();
  records_.clear();
  changed_records_.clear();
}

void CoordinatorCore::LoadRecords(std::map<std::string, std::string> records) {
  records_ = std::move(records);
}

std::vector<std::pair<std::string, std::string>> CoordinatorCore::TakeRecordChanges() {
  std::vector<std::pair<std::string, std::string>> changes;
  for (const std::string& id : changed_records_) {
    auto it = jobs_.find(id);
    std::string record;
    // The newest generation that runs is the job; one that waits for its rendezvous or its
    // resumption has nothing to add to what etcd holds.
    if (it != jobs_.end()) {
      const Job& job = *it->second.rbegin()->second;
      if (job.welcomed() && !job.failed() && !job.everyone_left()) record = job.Record().ToJson();
      else if (!job.welcomed()) continue;
    }
    auto known = records_.find(id);
    if (record.empty()) {
      if (known == records_.end()) continue;
      records_.erase(known);
    } else {
      if (known != records_.end() && known->second == record) continue;
      records_[id] = record;
    }
    changes.emplace_back(id, std::move(record));
  }
  changed_records_.clear();
  return changes;
}

void CoordinatorCore::HandleResume(const Source& source, const wire::Resume& msg,
                                   Clock::time_point now, Outbox* out) {
  const std::string& peer = source.peer;
  const wire::Register& reg = msg.register_();
  if (!ha_)
    return Refuse(peer, reg.job(), reg.rank(),
                  Status(Code::kInvalidArgument,
                         "resume: this tuttid is not part of an HA group (start it with --etcd "
                         "and --ha-group)"),
                  out);
  Job* job = nullptr;
  auto it = jobs_.find(reg.job());
  if (it != jobs_.end()) {
    Job& newest = *it->second.rbegin()->second;
    if (!SameSecret(newest.token(), reg.token()))
      return Refuse(peer, reg.job(), reg.rank(),
                    Status(Code::kAuthFailed, fmt::format("wrong token for job '{}'", reg.job())),
                    out);
    if (newest.resuming() && !newest.welcomed()) {
      job = &newest;
    } else {
      // A job this leader runs, some of whose ranks lost it (it was frozen, or they were cut
      // off) and came back: every rank resumes, so that they all meet at one point again.
      spdlog::warn("job '{}': rank {} resumes with this leader; asking its other ranks to",
                   reg.job(), reg.rank());
      newest.AskToResume(leader_, term_, out);
      const std::string id = reg.job();
      std::vector<uint64_t> generations;
      for (const auto& [generation, running] : it->second) generations.push_back(generation);
      for (uint64_t generation : generations) DropJob(id, generation);
    }
  }
  if (!job) {
    auto record_text = records_.find(reg.job());
    if (record_text == records_.end())
      return Refuse(peer, reg.job(), reg.rank(),
                    Status(Code::kCoordinatorLost,
                           fmt::format("coordinator lost: the HA group has no record of job '{}' "
                                       "(it ended, or its leader died before recording it); "
                                       "restart the job",
                                       reg.job())),
                    out);
    JobRecord record;
    Status status = JobRecord::FromJson(record_text->second, &record);
    if (status.ok() && !SameSecret(record.token_sha256, TokenHash(reg.token())))
      status = Status(Code::kAuthFailed, fmt::format("wrong token for job '{}'", reg.job()));
    if (status.ok() && !record.resumable)
      status = Status(Code::kCoordinatorLost,
                      fmt::format("coordinator lost: job '{}' re-formed as an elastic job, which "
                                  "an HA failover does not resume yet; restart it",
                                  reg.job()));
    if (status.ok() && (record.membership_epoch != msg.membership_epoch() ||
                        record.size != reg.size()))
      status = Status(Code::kMismatch,
                      fmt::format("resume: job '{}' is in membership epoch {} with {} ranks, not "
                                  "{} with {}",
                                  reg.job(), record.membership_epoch, record.size,
                                  msg.membership_epoch(), reg.size()));
    if (!status.ok()) return Refuse(peer, reg.job(), reg.rank(), status, out);
    const int64_t timeout = reg.rendezvous_timeout_ms() > 0 ? reg.rendezvous_timeout_ms()
                                                            : default_rendezvous_timeout_ms_;
    auto created = std::make_unique<Job>(reg.job(), record.membership_epoch, reg.token(),
                                         record.size, now + std::chrono::milliseconds(timeout),
                                         timeout, msg.job_secret(), epoch_, policy_);
    created->ExpectResume(std::move(record));
    job = created.get();
    jobs_[reg.job()].emplace(job->generation(), std::move(created));
    job_address_[reg.job()] = source.address;
    spdlog::info("job '{}': resuming under term {}, waiting for its {} ranks", reg.job(), term_,
                 reg.size());
  }
  int32_t slot = -1;
  const Status status = job->Resume(peer, msg, now, &slot, out);
  if (!status.ok()) {
    Refuse(peer, reg.job(), reg.rank(), status, out);
    if (job->peers().empty()) DropJob(reg.job(), job->generation());
    return;
  }
  members_[peer] = Member{reg.job(), job->generation(), slot};
  if (job->failed()) DropJob(reg.job(), job->generation());
}

}  // namespace tutti::server
