// The rank's half of the response cache (docs/response-cache.md): which cache slot the
// coordinator gave each tensor of each set, and the queue of announcements for the next Announce
// frame, where a tensor submitted again with an unchanged spec becomes one bit.
//
// Not thread-safe: the coordinator link guards it with its mutex, so that looking a tensor up
// and queueing its bit happen atomically with respect to evictions (an eviction applied between
// the two could otherwise let a bit name a slot that was reassigned).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::client {

class AnnounceCache {
 public:
  // Queues `spec` for the next Announce: as a bit when the set's cache holds this very spec
  // under its name, else in full.
  void Add(int32_t set_id, wire::TensorSpec spec);
  // The slot holding this very spec under its name, if any.
  std::optional<uint32_t> Lookup(int32_t set_id, const wire::TensorSpec& spec) const;
  // How the set's collective of `slot` ran last (the members' fast path runs it so again).
  struct Template {
    std::vector<int64_t> member_rows;
    wire::DevicePath device_path = wire::DEVICE_PATH_HOST;
    int32_t device_group = 0;
  };
  const Template* TemplateOf(int32_t set_id, uint32_t slot) const;
  // The set went on its fast path: every tensor announced (queued or sent) and not yet answered,
  // which tuttid drops or never sees, in announcement order; the queue of the set is emptied.
  std::vector<wire::TensorSpec> TakeOutstanding(int32_t set_id);
  // The set's next SetTensors says that this rank left fast-path `generation` after `rounds`.
  void MarkExit(int32_t set_id, uint64_t generation, uint64_t rounds);
  // The set's next SetTensors asks tuttid to autotune the set (tutti_process_set_autotune).
  void AskAutotune(int32_t set_id);
  bool empty() const { return queued_ == 0; }

  struct Drained {
    size_t full = 0, cached = 0;
  };
  // Moves everything queued into `announce`.
  Drained Drain(wire::Announce* announce);

  // Applies an Execute of `set_id` from the coordinator: records slots assigned to tensors,
  // names the tensors that responses refer to by slot (filling spec.name / FusedTensor.name),
  // then drops evicted slots. An error means the coordinator referred to a slot this rank never
  // heard of: a protocol violation.
  Status Apply(wire::Execute* execute);

  // A failover to a new HA leader (docs/high-availability.md, client/control/link_failover.cc).
  std::vector<int32_t> SetIds() const;
  // The set's cache as this rank holds it, for the new leader to rebuild its own from.
  wire::CacheState Snapshot(int32_t set_id) const;
  // The new leader never heard what is queued or in flight: everything announced and not yet
  // answered is queued again, in the order it was announced; evictions count from zero again,
  // as the new leader's do.
  void Requeue(int32_t set_id);

  // The set's tensor `name` was refused or failed before any response: forget its spec.
  void Forget(int32_t set_id, const std::string& name);
  // The set is gone.
  void DropSet(int32_t set_id);

 private:
  struct Entry {
    std::string name;
    std::optional<std::string> spec;  // what this rank announced, serialized; none if it joined
    Template last;
  };
  struct SetState {
    std::vector<std::optional<Entry>> slots;
    std::unordered_map<std::string, uint32_t> by_name;
    // Full specs announced and not yet answered, serialized: become a slot's spec on assignment.
    std::unordered_map<std::string, std::string> awaiting;
    uint64_t evictions_seen = 0;
    std::vector<wire::TensorSpec> full;  // queued
    std::vector<uint32_t> bits;          // queued slots
    uint64_t exit_generation = 0, exit_rounds = 0;  // queued fast-path exit
    bool autotune = false;                          // queued autotuning ask
    // Announced (queued or sent) and not yet answered by an Execute or a refusal, by name, with
    // the order of announcement: what a grant takes back onto the fast path.
    std::unordered_map<std::string, std::pair<uint64_t, wire::TensorSpec>> outstanding;
    uint64_t next_order = 0;
  };

  // Resolves one tensor of a response; `name` is filled in for a reference.
  Status Settle(SetState& set, int32_t set_id, std::string* name, uint32_t cache_slot, bool full,
                Template how);

  std::map<int32_t, SetState> sets_;
  size_t queued_ = 0;
};

}  // namespace tutti::client
