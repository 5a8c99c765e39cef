// Negotiation of one active process set: collects each member's announcement of a tensor and,
// once every member announced it, checks that they agree and releases one response (the agreed
// spec, or an error naming two disagreeing variants) to the set's ordered stream. Single-threaded.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/timeline.h"
#include "proto/protocol.h"
#include "server/core/process_set_table.h"
#include "server/core/response_cache.h"
#include "server/core/set_metrics.h"
#include "server/core/set_stats.h"

namespace tutti::server {

class ServiceMetrics;

// Tensors a whole job may have waiting for members, shared by its sets' negotiators: the flood
// limit that keeps one job from taking tuttid's memory (docs/security.md).
struct PendingBudget {
  size_t used = 0;
  size_t limit = SIZE_MAX;
  std::string job;
};

class Negotiator {
 public:
  // Tensors one set may have waiting for members; beyond it announcements are refused, so that a
  // rank announcing without end cannot grow tuttid's memory without bound.
  static constexpr size_t kMaxPending = 1 << 20;

  // Device combinations (docs/wire-protocol.md, "Device paths") one set may use; a collective on
  // a further one fails with kLimitExceeded, so that a rank cannot grow the table without bound.
  static constexpr size_t kMaxDeviceGroups = 64;

  // `hosts`: each member's host identity (Register.host), indexed like `members`; empty: all on
  // one host.
  Negotiator(int32_t set_id, std::vector<int32_t> members, uint32_t cache_capacity = 0,
             const std::vector<std::string>& hosts = {});

  const std::vector<int32_t>& members() const { return members_; }
  ResponseCache& cache() { return cache_; }
  // Records negotiations on `track` of `timeline` (which outlives the negotiator).
  void set_timeline(Timeline* timeline, int32_t track) {
    timeline_ = timeline;
    track_ = track;
  }
  // Counts fresh tensors against `budget` (which outlives the negotiator), refusing them with
  // kLimitExceeded once it is spent.
  void set_budget(PendingBudget* budget) { budget_ = budget; }
  // Reports completed negotiations to `metrics` (which outlives the negotiator).
  void set_metrics(ServiceMetrics* metrics) { metrics_ = metrics; }
  // Tallies completed negotiations and their stragglers into `stats` (which outlives the
  // negotiator; the job keeps it across the set's re-formations), for the status page.
  void set_stats(SetStats* stats) { stats_ = stats; }
  SetStats* stats() const { return stats_; }
  // Names the job in log lines (the staged-path warnings).
  void set_job(std::string job) { job_ = std::move(job); }
  // Device combinations assigned a device group so far (groups 0 .. n-1).
  size_t device_groups() const { return device_groups_.size(); }
  size_t pending_count() const { return pending_.size(); }

  // Records `rank`'s announcement of `spec`. If that completes the tensor, appends its response to
  // `ready`. Errors concern only the announcing rank (not a member, announced twice).
  Status Announce(int32_t rank, const wire::TensorSpec& spec, std::vector<wire::Response>* ready,
                  Clock::time_point now = Clock::now());
  // The same for a tensor announced as response-cache `slot`; when it is refused, `name` is set to
  // the tensor's name if the slot holds one for `rank`.
  Status AnnounceCached(int32_t rank, uint32_t slot, std::vector<wire::Response>* ready,
                        Clock::time_point now = Clock::now(), std::string* name = nullptr);
  // Every tensor `set` announces as response-cache bits, for `rank`; `refused(slot, name, status)`
  // hears of each bit refused (`name` empty when the slot holds nothing for the rank). Returns the
  // number of bits. The steady state's path: a bit costs a few memory accesses, no lookup by name.
  using RefusedBit = std::function<void(uint32_t slot, const std::string& name, const Status&)>;
  size_t AnnounceCachedBits(int32_t rank, const wire::SetTensors& set,
                            std::vector<wire::Response>* ready, Clock::time_point now,
                            const RefusedBit& refused);
  // `rank` applied its first `seen` cache evictions.
  void AcknowledgeEvictions(int32_t rank, uint64_t seen);

  // Stall inspection (negotiator_stalls.cc): tensors some members announced and others did not.
  struct Stall {
    std::string name;
    std::vector<int32_t> missing, submitted;
    Clock::duration waited;
  };
  // Pending tensors, oldest first: at most `limit` of them, for the status page.
  std::vector<Stall> Describe(Clock::time_point now, size_t limit) const;
  // Reports (once each) tensors waiting longer than `warn_after` in `warned`, and fails with
  // kStalled those waiting longer than `fail_after` into `failed`. A zero duration disables
  // either check.
  void Inspect(Clock::time_point now, Clock::duration warn_after, Clock::duration fail_after,
               std::vector<Stall>* warned, std::vector<Stall>* stalled,
               std::vector<wire::Response>* failed);
  // When Inspect has something to do next, if anything is pending.
  std::optional<Clock::time_point> NextInspection(Clock::duration warn_after,
                                                  Clock::duration fail_after) const;

  // Fails every tensor still waiting for members with `status`.
  void FailPending(const Status& status, std::vector<wire::Response>* out);

  // After a member is lost the set cannot run collectives: pending tensors fail with `status`
  // and later announcements are refused with it.
  void Break(const Status& status, std::vector<wire::Response>* out);
  bool contains(int32_t rank) const;

  // Join: `rank` has no more data. Tensors then complete without it (allreduce with it
  // contributing the identity, allgather with no rows from it; the other kinds refuse), which may
  // release some at once into `ready`. Returns true once every member joined; the join is then
  // over and `last_joined` says who came last.
  bool Join(int32_t rank, std::vector<wire::Response>* ready, int32_t* last_joined);
  // Takes back the join of `rank` (its wait timed out).
  void Unjoin(int32_t rank);

  // The members' fast path (negotiator_fast_path.cc, docs/steady-state.md). While the set is on
  // it, a member that has not left it announces nothing here: whatever it sent before it heard
  // of the grant is dropped (it takes it back itself).
  void set_fast_path_allowed(bool allowed) { fast_path_allowed_ = allowed; }
  bool OnFastPath(int32_t rank) const;
  // `rank` left generation `generation` after `rounds` rounds; its announcements count again.
  // kInternal if the members ran different numbers of rounds (they must all run the same
  // sequence); an exit of another generation is stale and ignored.
  Status ExitFastPath(int32_t rank, uint64_t generation, uint64_t rounds);
  // For the Execute numbered `seq`, whose responses all succeeded if `all_ok`: the generation the
  // set enters after it (seq + 1), or 0 when it stays with tuttid. It goes on the fast path when
  // the responses since the last Execute were all announced from the cache by every member,
  // nothing else waits here, no member joined, and the cache's priorities agree.
  uint64_t MaybeGrant(uint64_t seq, bool all_ok);
  size_t fast_path_members() const { return fast_.members_on; }
  // A resumed job (docs/high-availability.md): member `rank` reports the set's cache as it holds
  // it and the fast-path generation it runs (0: none), as the members' CacheState says.
  Status RestoreState(int32_t rank, const wire::CacheState& state);

  // Sequence number for the next Execute sent to this set's members.
  uint64_t TakeSeq() { return next_seq_++; }
  // A set re-formed into a fresh negotiator (docs/elastic.md) goes on with its stream's numbers.
  void set_next_seq(uint64_t seq) { next_seq_ = seq; }

 private:
  // One tensor some members announced. Its cost does not grow with what members announce alike:
  // each distinct spec is kept once (a variant), a member's announcement is a bit, and a member's
  // variant index is kept only once members differ (docs/scale.md).
  struct Pending {
    std::vector<SpecRef> variants;
    std::vector<uint32_t> variant_of;  // by member; empty: whoever announced, announced variants[0]
    std::vector<uint64_t> announced;   // bit per member
    size_t announced_count = 0;
    size_t covered = 0;  // members that announced or joined: complete at members_.size()
    uint32_t slot = kNoSlot;  // the cache slot whose hint (hints_) leads to it, if any
    std::list<std::string>::iterator order;  // its place in pending_order_
    Clock::time_point first_announced;
    Clock::time_point all_but_one;  // when all but one member had announced (when timed)
    bool warned = false;
    bool all_cached = true;  // every member announced it from the response cache
  };
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  using PendingMap = std::unordered_map<std::string, Pending>;

  static bool Announced(const Pending& pending, size_t index) {
    return (pending.announced[index / 64] >> (index % 64)) & 1;
  }
  // What member `index` announced, or null.
  static const AnnouncedSpec* SpecOf(const Pending& pending, size_t index) {
    if (!Announced(pending, index)) return nullptr;
    return pending.variants[pending.variant_of.empty() ? 0 : pending.variant_of[index]].get();
  }
  size_t IndexOf(int32_t rank) const;
  // A cached bit of member `index` (a member): expands it and records it.
  Status AnnounceCachedAt(size_t index, int32_t rank, uint32_t slot,
                          std::vector<wire::Response>* ready, Clock::time_point now,
                          std::string* name);
  // Records member `index`'s announcement (full or expanded from the cache) and releases what
  // completes; finds (or opens) the tensor's entry by name.
  Status Record(size_t index, int32_t rank, const SpecRef& spec, bool cached,
                std::vector<wire::Response>* ready, Clock::time_point now);
  // The same into `pending`, the entry of `spec`'s name.
  Status RecordInto(Pending& pending, size_t index, int32_t rank, const SpecRef& spec, bool cached,
                    std::vector<wire::Response>* ready);
  // Forgets a pending entry: its slot link, its order, its budget.
  void Forget(PendingMap::iterator entry);
  // Checks that the members agree and builds the response (negotiator_agreement.cc).
  wire::Response Resolve(const std::string& name, const Pending& pending);
  // Sets the device path and group of a response that resolved without error (partial: some
  // members joined and announced nothing). In negotiator_device_path.cc.
  void ChooseDevicePath(const std::string& name, const Pending& pending, wire::Response* response);
  // Puts a failure in a response; shared by the negotiator's files.
  static void SetError(wire::Response* response, Code code, const std::string& message);
  // Releases the tensor if every member that has not joined announced it; `last_rank` completed it.
  void ReleaseIfComplete(PendingMap::iterator entry, int32_t last_rank,
                         std::vector<wire::Response>* ready);
  // Appends a released response, holding grouped ones back until their group is whole.
  void Release(wire::Response response, std::vector<wire::Response>* ready);
  bool Complete(const Pending& pending) const { return pending.covered == members_.size(); }
  // Whether negotiations are timed: only for someone who reads the times (a clock read per tensor).
  bool timed() const { return metrics_ != nullptr || stats_ != nullptr; }

  int32_t set_id_;
  std::vector<int32_t> members_;
  PendingMap pending_;
  std::list<std::string> pending_order_;  // first-announced order, for deterministic FailPending
  // By cache slot: the pending entry its bits go to, and that entry's bits, so that a bit of the
  // steady state reads this and the entry and nothing else (no lookup by name, not the cache).
  // Set only while the slot holds one spec for every member and it is the entry's first variant;
  // cleared when the entry goes, and all of them when the cache frees a slot (which it may then
  // give to another tensor): a hint that is set is right.
  struct SlotHint {
    Pending* pending = nullptr;
    uint64_t* announced = nullptr;  // pending->announced's words
  };
  std::vector<SlotHint> hints_;
  uint64_t cache_frees_seen_ = 0;
  void ClearHints();
  std::unordered_map<std::string, std::vector<wire::Response>> groups_;  // resolved, held until whole
  uint64_t next_seq_ = 0;
  Status broken_;
  std::vector<bool> joined_;  // indexed like members_
  size_t joined_count_ = 0;
  ResponseCache cache_;
  struct FastPath {
    uint64_t generation = 0;  // the current or last generation; 0: never granted
    std::vector<bool> on;     // by member: still on it
    size_t members_on = 0;
    std::optional<uint64_t> rounds;  // what the first member to leave reported
  } fast_;
  bool fast_path_allowed_ = false;
  // Released since the last Execute: tensors every member announced from the cache, and others.
  size_t released_cached_ = 0, released_other_ = 0;
  Timeline* timeline_ = nullptr;
  int32_t track_ = 0;
  PendingBudget* budget_ = nullptr;
  ServiceMetrics* metrics_ = nullptr;
  SetMetrics::Series* set_series_ = nullptr;  // this set's, made at its first release
  SetStats* stats_ = nullptr;
  std::string job_;
  // Per member: the index of the first member on the same host, so that host identities (of any
  // length) are compared once, here, and device combinations stay small.
  std::vector<uint32_t> host_of_;
  std::vector<std::string> host_names_;  // by member, for log lines: the identity's hostname part
  struct DeviceGroup {
    int32_t index;
    wire::DevicePath path;
  };
  // Device combination (encoded by member: device type, host, GPU uuid and index) -> its group.
  std::unordered_map<std::string, DeviceGroup> device_groups_;
};

// "allreduce float32[4, 2] op=sum" plus any non-default scale factors and device.
std::string DescribeSpec(const wire::TensorSpec& spec);

}  // namespace tutti::server
