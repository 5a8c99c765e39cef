// The coordinator's logic without sockets: frames in (with the sender's routing id), frames out.
// Keeps the jobs and which routing id belongs to which (job, rank). Single-threaded; time is passed
// in so that tests can drive deadlines.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "server/job.h"

namespace tutti::server {

class CoordinatorCore {
 public:
  CoordinatorCore(int64_t default_rendezvous_timeout_ms, uint64_t epoch, Job::Policy policy,
                  size_t max_jobs);
  uint64_t epoch() const { return epoch_; }

  // Handles one frame from routing id `peer`; appends the frames to send to `out`.
  void HandleFrame(const std::string& peer, const void* data, size_t size, Clock::time_point now,
                   Outbox* out);
  // Sends what the Announce frames handled since the last call completed (docs/fusion.md).
  void Flush(Outbox* out);
  // Fires the deadlines that passed (rendezvous, process-set changes).
  void Tick(Clock::time_point now, Outbox* out);
  std::optional<Clock::time_point> NextDeadline() const;
  // tuttid is stopping: tells every rank of every job (docs/failures.md).
  void GoingAway(Outbox* out) const;

  size_t job_count() const { return jobs_.size(); }

 private:
  struct Member {
    std::string job;
    int32_t rank;
  };

  void HandleRegister(const std::string& peer, const wire::Register& msg, Clock::time_point now,
                      Outbox* out);
  void DropJob(const std::string& id);
  // Moves the ranks `job` declared lost from members_ to evicted_.
  void CollectEvicted(Job& job);

  int64_t default_rendezvous_timeout_ms_;
  uint64_t epoch_;
  Job::Policy policy_;
  size_t max_jobs_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::map<std::string, Member> members_;  // by routing id
  struct Tombstone {
    std::string job;
    Status status;
  };
  // Routing ids of ranks declared lost, kept while their job lives: whatever they send later is
  // stale and answered with `status`.
  std::map<std::string, Tombstone> evicted_;
};

}  // namespace tutti::server
