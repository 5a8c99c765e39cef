// Hierarchical allreduce across hosts, and the choice between it and the flat algorithms
// (docs/algorithms.md, "Hierarchical allreduce"). A set whose members sit on several hosts, the
// same number on each, reduces in three phases: a ring reduce-scatter within each host (shared
// memory), one ring allreduce per shard across the hosts among the members with the same local
// index (so every member drives its own cross-host connections, and all of them carry data),
// and a ring allgather within each host.
//
// The choice is a pure function of the set's topology (the host of each member, as tuttid told
// every rank at registration), the byte size and the job-wide mode and threshold; every member
// evaluates it on the same inputs, so all of them run the same algorithm and end bitwise
// identical. Threads: everything here runs on the set's lane thread; a SetTopology is built once
// when the lane opens and read-only afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/exec/ring_allreduce.h"
#include "common/dtype.h"
#include "common/member_list.h"

namespace tutti::client {

// TUTTI_HIERARCHICAL: auto (the topology and size decide), 0 (always flat), 1 (hierarchical
// wherever the topology allows it, whatever the size). A job-wide setting: every rank must see
// the same value, as with the fusion threshold.
enum class HierarchyMode { kAuto, kOff, kOn };

// Below this many bytes, auto stays flat: the three phases cost 2(L-1) + 2(H-1) latency-bound
// steps against the ring's 2(LH-1), which wins nothing when the steps are latency-bound, and a
// shard of a few KiB per member is all per-step overhead. Above it the cross-host links carry
// 2(H-1)/H of the buffer per host instead of the flat ring's 2(n-1)/n per member crossing, and
// every local rank uses its own connection (docs/algorithms.md for the measurements).
constexpr size_t kDefaultHierarchicalMinBytes = 64 << 10;

// The hosts of one set's members and the mode, fixed for the life of a lane.
struct SetTopology {
  // host_of[i]: an id of the host of the member at position i of the set's member list (equal
  // ids, same host). Empty: unknown, always flat.
  std::vector<int32_t> host_of;
  HierarchyMode mode = HierarchyMode::kAuto;
  size_t min_bytes = kDefaultHierarchicalMinBytes;
};

// `hosts[slot]`: the host identity of each slot (tuttid's peer list). Members missing from it
// get a host of their own.
SetTopology TopologyOf(const MemberList& members, const std::vector<std::string>& hosts,
                       HierarchyMode mode, size_t min_bytes);

// This member's two groups in the hierarchy, or uniform == false where the set is not made of
// at least two hosts holding the same number (at least two) of its members.
struct HostGroups {
  bool uniform = false;
  size_t hosts = 0, per_host = 0;
  MemberList local;  // this member's host, ascending; its position there is its local index
  MemberList cross;  // one member per host: those with this member's local index, ascending
};
HostGroups GroupByHost(const MemberList& members, const SetTopology& topology, int32_t self);

enum class AllreduceAlgorithm { kDirect, kRing, kHierarchical };
const char* AlgorithmName(AllreduceAlgorithm algorithm);

// The pure choice. dtype and op do not change it today (every reduction is elementwise and the
// phases keep each element's operand order fixed), but they are inputs so that a later rule, a
// dtype whose reduction costs more than the link, say, stays a function of what every member
// agrees on.
AllreduceAlgorithm ChooseAllreduce(const MemberList& members, const SetTopology* topology,
                                   size_t bytes, DType dtype, ReduceOp op);

// The three phases, for a set GroupByHost found uniform. Reduction order of every element:
// within each host, the ring reduce-scatter's (chunk j of the host's L chunks starts at local
// member j + 1 and accumulates around the host's ring to local member j); across hosts, the
// ring's order (or, for a shard of at most kDirectAllreduceMaxBytes, the direct exchange's host
// order) over those per-host partial sums; then copies only.
Status HierarchicalAllreduce(const RingArgs& ring, const HostGroups& groups, void* buffer,
                             size_t count, DType dtype, ReduceOp op);

// ChooseAllreduce, then the algorithm it names. `*used`, if given, says which ran.
Status ChosenAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       AllreduceAlgorithm* used = nullptr);

}  // namespace tutti::client
