// The process sets of one job (DESIGN.md section 3). Set 0 is the world; other ids are allocated at
// the first mention of a rank list and never reused. Adding and removing are collective over the
// set's members only: a non-member is answered at once, a member waits until every member asked
// (or its own deadline passes). Single-threaded: owned by the coordinator's event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/status.h"

namespace tutti::server {

using Clock = std::chrono::steady_clock;

class ProcessSetTable {
 public:
  // An answer owed to one rank's add or remove request.
  struct Reply {
    int32_t rank;
    uint64_t request_id;
    Status status;
    int32_t set_id;
    std::vector<int32_t> ranks;
  };
  // What one call changed, for the caller to act on.
  struct Events {
    std::vector<Reply> replies;
    std::vector<int32_t> activated;  // sets that became usable
    std::vector<int32_t> removed;    // sets whose removal completed
  };

  explicit ProcessSetTable(int32_t world_size);

  // Sorts `ranks` and checks it names a non-empty list of distinct ranks of the world; the error
  // names the offending ranks.
  static Status Normalize(int32_t world_size, std::vector<int32_t>* ranks);

  // Installs the sets given at init as active sets 1..n. Rejects bad or repeated rank lists.
  Status DefineStatic(std::vector<std::vector<int32_t>> lists, std::vector<int32_t>* ids);

  void Add(int32_t caller, uint64_t request_id, std::vector<int32_t> ranks, int64_t timeout_ms,
           Clock::time_point now, Events* events);
  void Remove(int32_t caller, uint64_t request_id, int32_t set_id, int64_t timeout_ms,
              Clock::time_point now, Events* events);
  // Answers the waiters whose deadline passed with a timeout naming the ranks that never came.
  void Expire(Clock::time_point now, Events* events);

  // `rank` is gone for good: changes of sets containing it fail now with `status`, and so do
  // later adds of such sets.
  void MarkLost(int32_t rank, const Status& status, Events* events);
  // Elastic jobs (docs/elastic.md): `rank` left the job, which goes on without it. Every change in
  // flight fails with `status`; every set drops the rank (a set left empty is removed, into
  // events->removed; one still being added is forgotten); later adds naming it fail with `status`.
  // Two sets left with the same ranks keep their ids; an add of those ranks finds the older one.
  void Reform(int32_t rank, const Status& status, Events* events);
  // Elastic jobs: `added` (ascending, each above every rank so far) joined the world. Every change
  // in flight fails with `status`; the world gets them; no other set does.
  void Grow(const std::vector<int32_t>& added, const Status& status, Events* events);
  std::optional<Clock::time_point> NextDeadline() const;

  // High availability (docs/high-availability.md). The sets a job record keeps: every set that
  // exists (active, or being removed), world first, by id; and the id the next new set gets.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> Existing() const;
  int32_t next_id() const { return next_id_; }
  // A resumed job: installs `sets` (as Existing() gave them; the world is already there) as
  // active sets and goes on numbering from `next_id`.
  void Restore(const std::vector<std::pair<int32_t, std::vector<int32_t>>>& sets, int32_t next_id);

  // The sorted ranks of an active set, or kUnknownSet saying why there is none.
  Status Members(int32_t set_id, const std::vector<int32_t>** ranks) const;

 private:
  enum class State { kAdding, kActive, kRemoving };
  struct Waiter {
    int32_t rank;
    uint64_t request_id;
    int64_t timeout_ms;
    Clock::time_point deadline;
  };
  struct Entry {
    std::vector<int32_t> ranks;
    State state;
    std::vector<Waiter> waiters;
  };

  // Records `waiter`; returns true once every member of `entry` waits.
  static bool Arrive(Entry* entry, const Waiter& waiter, Events* events, int32_t set_id);

  int32_t world_size_;
  int32_t next_id_ = 1;
  std::map<int32_t, Entry> live_;                   // by id: adding, active or removing
  std::map<std::vector<int32_t>, int32_t> by_ranks_;  // the live sets by their rank list
  std::map<int32_t, Status> lost_;                    // ranks gone, with why
};

// "[0, 2, 3]"
std::string FormatRanks(const std::vector<int32_t>& ranks);

}  // namespace tutti::server
