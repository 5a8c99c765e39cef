// The coordinator's logic without sockets: frames in (with the sender's routing id), frames out.
// Keeps the jobs and which routing id belongs to which (job, rank). Single-threaded; time is passed
// in so that tests can drive deadlines.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "server/core/address_limiter.h"
#include "server/core/job.h"
#include "server/core/recent_errors.h"
#include "server/security/curve_keys.h"

namespace tutti::server {

class CoordinatorCore {
 public:
  CoordinatorCore(int64_t default_rendezvous_timeout_ms, uint64_t epoch, Job::Policy policy,
                  size_t max_jobs);
  uint64_t epoch() const { return epoch_; }

  // Where a frame came from. Only frames of connections that have not registered need more than
  // the routing id (see knows()).
  struct Source {
    std::string peer;     // ZeroMQ routing id
    std::string address;  // the client's IP address ("" if unknown)
    std::string key;      // the CURVE public key (Z85) it authenticated with; "" without CURVE
  };
  // Handles one frame; appends the frames to send to `out`.
  void HandleFrame(const Source& source, const void* data, size_t size, Clock::time_point now,
                   Outbox* out);
  void HandleFrame(const std::string& peer, const void* data, size_t size, Clock::time_point now,
                   Outbox* out) {
    HandleFrame(Source{peer, "", ""}, data, size, now, out);
  }
  // Whether `peer` registered: its frames need no Source beyond the routing id.
  bool knows(const std::string& peer) const { return members_.count(peer) != 0; }

  // Prometheus series to feed (null: none). Set before any job registers.
  void set_metrics(ServiceMetrics* metrics) { policy_.metrics = metrics; }
  // CURVE: a registration must be for an identity its key is listed under (null: no CURVE).
  void set_client_keys(const CurveServerKeys* keys) { keys_ = keys; }
  // Floods: registrations per second (and burst) from one address, and jobs one address may have
  // waiting for their rendezvous.
  // Also the ranks those jobs declared in all, which their state is sized by.
  void set_address_limits(double registrations_per_second, double burst,
                          size_t rendezvous_jobs_per_address,
                          size_t rendezvous_ranks_per_address) {
    registrations_ = AddressLimiter(registrations_per_second, burst);
    rendezvous_jobs_per_address_ = rendezvous_jobs_per_address;
    rendezvous_ranks_per_address_ = rendezvous_ranks_per_address;
  }

  // For the status page: every job, and the recent errors.
  nlohmann::json Describe(Clock::time_point now) const;
  // Sets the Prometheus gauges from the jobs' state.
  void UpdateGauges() const;
  // Sends what the Announce frames handled since the last call completed (docs/fusion.md).
  void Flush(Outbox* out);
  // Fires the deadlines that passed (rendezvous, process-set changes).
  void Tick(Clock::time_point now, Outbox* out);
  std::optional<Clock::time_point> NextDeadline() const;
  // The socket has no connection for routing id `peer` (a send found no route): a rank behind it
  // is declared lost at the next Tick, after the frames it sent last were read (docs/elastic.md,
  // "Detection").
  void Unreachable(const std::string& peer);
  // Some control connection closed: queues a heartbeat to every live rank, whose sends find the
  // routes that are gone.
  void CheckConnections(Outbox* out) const;
  // tuttid is stopping: tells every rank of every job (docs/failures.md).
  void GoingAway(Outbox* out) const;

  size_t job_count() const { return jobs_.size(); }

  // High availability (coordinator_ha.cc, docs/high-availability.md). Off unless EnableHa: then
  // the core keeps every job's record for etcd, takes ranks back with Resume, and serves only
  // while it leads.
  void EnableHa(std::function<bool()> may_release);
  bool ha() const { return ha_; }
  // This instance now leads with `term` (`self`: its own endpoint, for redirects), or is a
  // standby of `leader` ("" if none is known). A leader that stops leading forgets its jobs
  // without a word to their ranks: they resume with the new leader.
  void SetRole(bool leading, const std::string& self_or_leader, uint64_t term);
  bool leading() const { return !ha_ || leading_; }
  // The job records etcd holds (job id -> JobRecord::ToJson), read by a new leader first.
  void LoadRecords(std::map<std::string, std::string> records);
  // Records written or erased since the last call, for etcd: (job id, record; empty: erase).
  std::vector<std::pair<std::string, std::string>> TakeRecordChanges();

 private:
  struct Member {
    std::string job;
    uint64_t generation;  // Job::generation()
    int32_t rank;
    // When its last Heartbeat was echoed: at most two echoes per heartbeat interval, so that a
    // rank spamming heartbeats makes tuttid read, not write (docs/scale.md).
    Clock::time_point echoed{};
  };
  // The generations of one job id, by membership epoch (docs/lifecycle.md): usually one; two
  // while some ranks initialize again before the others finalized.
  using Generations = std::map<uint64_t, std::unique_ptr<Job>>;

  // `protocol`: the version of the frame the registration came in (proto/versions.h).
  void HandleRegister(const Source& source, const wire::Register& msg, uint32_t protocol,
                      Clock::time_point now, Outbox* out);
  void HandleResume(const Source& source, const wire::Resume& msg, Clock::time_point now,
                    Outbox* out);
  // Refuses `peer` (counted in the metrics and the recent errors).
  void Refuse(const std::string& peer, const std::string& job, int32_t rank, const Status& status,
              Outbox* out);
  // A registration past flood limit `limit` (the metrics' label): kLimitExceeded with `message`.
  void RefuseLimited(const std::string& limit, const std::string& peer, const wire::Register& msg,
                     const std::string& message, Outbox* out);
  // Drops one generation of job `id` (the job id once its last generation is gone).
  void DropJob(std::string id, uint64_t generation);  // a copy: may be a job's own id()
  Job& JobOf(const Member& member) { return *jobs_.at(member.job).at(member.generation); }
  // Calls f(Job&) for every generation of every job.
  template <typename F>
  void ForEachJob(F&& f) const {
    for (const auto& [id, generations] : jobs_)
      for (const auto& [epoch, job] : generations) f(*job);
  }
  // Moves the ranks `job` declared lost from members_ to evicted_.
  void CollectEvicted(Job& job);

  int64_t default_rendezvous_timeout_ms_;
  uint64_t epoch_;
  Job::Policy policy_;
  size_t max_jobs_;
  std::map<std::string, Generations> jobs_;  // by job id
  std::map<std::string, std::string> job_address_;  // job id -> the address that created it
  const CurveServerKeys* keys_ = nullptr;
  AddressLimiter registrations_{0, 0};
  size_t rendezvous_jobs_per_address_ = SIZE_MAX;
  size_t rendezvous_ranks_per_address_ = SIZE_MAX;
  RecentErrors errors_;
  std::unordered_map<std::string, Member> members_;  // by routing id: looked up for every frame
  struct Tombstone {
    std::string job;
    uint64_t generation;
    Status status;
  };
  // Routing ids of ranks declared lost, the latest kMaxTombstones of them, also after their job
  // ended: whatever they send later is stale and answered with `status`. A link keeps its routing
  // id across reconnections (client/control/coordinator_link.cc).
  static constexpr size_t kMaxTombstones = 1 << 16;
  std::map<std::string, Tombstone> evicted_;
  std::deque<std::string> evicted_order_;  // oldest first

  // High availability.
  bool ha_ = false;
  bool leading_ = false;
  std::string leader_;  // this instance's endpoint while it leads, else the leader's
  uint64_t term_ = 0;
  std::map<std::string, std::string> records_;  // job id -> record, as etcd holds them
  std::set<std::string> changed_records_;       // job ids whose record changed (Policy)
};

}  // namespace tutti::server
