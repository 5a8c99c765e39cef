// Negotiation of one active process set: collects each member's announcement of a tensor and,
// once every member announced it, checks that they agree and releases one response (the agreed
// spec, or an error naming two disagreeing variants) to the set's ordered stream. Single-threaded.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::server {

class Negotiator {
 public:
  // Tensors one set may have waiting for members; beyond it announcements are refused, so that a
  // rank announcing without end cannot grow tuttid's memory without bound.
  static constexpr size_t kMaxPending = 1 << 20;

  Negotiator(int32_t set_id, std::vector<int32_t> members);

  const std::vector<int32_t>& members() const { return members_; }

  // Records `rank`'s announcement of `spec`. If that completes the tensor, appends its response to
  // `ready`. Errors concern only the announcing rank (not a member, announced twice).
  Status Announce(int32_t rank, const wire::TensorSpec& spec, std::vector<wire::Response>* ready);

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

  // Sequence number for the next Execute sent to this set's members.
  uint64_t TakeSeq() { return next_seq_++; }

 private:
  struct Pending {
    std::vector<std::optional<wire::TensorSpec>> by_member;  // indexed like members_
    std::list<std::string>::iterator order;  // its place in pending_order_
  };

  wire::Response Resolve(const std::string& name, const Pending& pending) const;
  // Releases the tensor if every member that has not joined announced it.
  void ReleaseIfComplete(std::unordered_map<std::string, Pending>::iterator entry,
                         std::vector<wire::Response>* ready);
  bool Complete(const Pending& pending) const;

  int32_t set_id_;
  std::vector<int32_t> members_;
  std::unordered_map<std::string, Pending> pending_;
  std::list<std::string> pending_order_;  // first-announced order, for deterministic FailPending
  std::unordered_map<std::string, std::vector<wire::Response>> groups_;  // resolved, held until whole
  uint64_t next_seq_ = 0;
  Status broken_;
  std::vector<bool> joined_;  // indexed like members_
  size_t joined_count_ = 0;
};

// "allreduce float32[4, 2] op=sum" plus any non-default scale factors and device.
std::string DescribeSpec(const wire::TensorSpec& spec);

}  // namespace tutti::server
