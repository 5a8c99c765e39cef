// Hierarchical collectives across hosts, and the choice between them and the flat algorithms
// (docs/algorithms.md, "Hierarchical collectives"). A set whose members sit on several hosts, the
// same number on each, splits every large collective into phases within each host (shared
// memory) and phases across hosts among the members with the same local index, so that every
// member drives its own cross-host connections and all of them carry data:
//   allreduce:     reduce-scatter within the host, allreduce of one shard across, allgather within;
//   allgather:     allgather across (each member's own chunk), then allgather within, host by host;
//   reducescatter: reduce-scatter within, host by host, then reduce-scatter across;
//   broadcast:     tree within the root's host, one slice per local index across, allgather within.
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
  // Every host's members as positions in the set's member list, ascending; hosts in the order
  // of their ids (the same on every member).
  std::vector<std::vector<size_t>> host_positions;
};
HostGroups GroupByHost(const MemberList& members, const SetTopology& topology, int32_t self);

// kNone: the collective has no choice to make (alltoall, barrier).
enum class Algorithm : uint8_t { kNone, kDirect, kRing, kTree, kHierarchical };
const char* AlgorithmName(Algorithm algorithm);

// Whether a collective of `bytes` in all runs hierarchically on this set: the mode allows it,
// the size reaches the threshold (auto), and the hosts are uniform (GroupByHost).
bool ChooseHierarchy(const MemberList& members, const SetTopology* topology, size_t bytes);

// The pure choices, one per collective; `bytes`: the whole buffer (allgather: every member's
// rows; reducescatter: the input). dtype and op do not change the allreduce's today (every
// reduction is elementwise and the phases keep each element's operand order fixed), but they are
// inputs so that a later rule, a dtype whose reduction costs more than the link, say, stays a
// function of what every member agrees on.
Algorithm ChooseAllreduce(const MemberList& members, const SetTopology* topology, size_t bytes,
                          DType dtype, ReduceOp op,
                          size_t small_allreduce_bytes = kDirectAllreduceMaxBytes);
Algorithm ChooseAllgather(const MemberList& members, const SetTopology* topology, size_t bytes);
Algorithm ChooseReducescatter(const MemberList& members, const SetTopology* topology, size_t bytes);
Algorithm ChooseBroadcast(const MemberList& members, const SetTopology* topology, size_t bytes);

// The three phases, for a set GroupByHost found uniform. Reduction order of every element:
// within each host, the ring reduce-scatter's (chunk j of the host's L chunks starts at local
// member j + 1 and accumulates around the host's ring to local member j); across hosts, the
// ring's order (or, for a shard of at most the small-allreduce cut-off, the direct exchange's host
// order) over those per-host partial sums; then copies only. Out of place (`from`), only the
// first phase reads the input; the others work on `buffer`.
Status HierarchicalAllreduce(const RingArgs& ring, const HostGroups& groups, void* buffer,
                             size_t count, DType dtype, ReduceOp op, const Contribution& from = {});

// `chunks`: one per member, in set order; this member starts with its own. Afterwards every
// member holds all of them. Across hosts, the cross ring of this member's local index; then,
// for each host in turn, the host's ring passes that host's chunks. Copies only.
Status HierarchicalAllgather(const RingArgs& ring, const HostGroups& groups, char* data,
                             const ChunkLayout& chunks);

// `chunks`: one per member, in set order, of a buffer every member holds whole. Afterwards the
// member at position i holds chunk i reduced over every member. Reduction order of an element
// of member m's chunk: within each host, the host ring's reduce-scatter order over that host's
// copies (ending at the member with m's local index); across hosts, the cross ring's order over
// those per-host partial sums (ending at m).
Status HierarchicalReducescatter(const RingArgs& ring, const HostGroups& groups, char* data,
                                 const ChunkLayout& chunks, DType dtype, ReduceOp op);

// `bytes` of `data` from `root` (a member's rank) to every member: a tree within the root's host,
// then slice j of L even slices across hosts from the root host's member of local index j (a
// tree over the cross group), then, on every other host, an allgather of the L slices.
Status HierarchicalBroadcast(const RingArgs& ring, const HostGroups& groups, char* data,
                             size_t bytes, int32_t root);

// Choose*, then the algorithm it names, recorded in `*ring.ran` where given. The allreduce may be
// out of place (`from`): the choice does not depend on it, so members that differ there agree.
Status ChosenAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       const Contribution& from = {});
Status ChosenAllgather(const RingArgs& ring, char* data, const ChunkLayout& chunks);
Status ChosenReducescatter(const RingArgs& ring, char* data, const ChunkLayout& chunks,
                           DType dtype, ReduceOp op);
Status ChosenBroadcast(const RingArgs& ring, char* data, size_t bytes, int32_t root);

}  // namespace tutti::client
