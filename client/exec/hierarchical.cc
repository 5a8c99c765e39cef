#include "client/exec/hierarchical.h"

#include <algorithm>
#include <map>

namespace tutti::client {

SetTopology TopologyOf(const MemberList& members, const std::vector<std::string>& hosts,
                       HierarchyMode mode, size_t min_bytes) {
  SetTopology topology;
  topology.mode = mode;
  topology.min_bytes = min_bytes;
  // Ids by first appearance in set order: the same on every member, which sees the same list.
  std::map<std::string, int32_t> ids;
  int32_t unknown = -1;
  for (int32_t slot : members) {
    if (slot < 0 || static_cast<size_t>(slot) >= hosts.size() || hosts[slot].empty()) {
      topology.host_of.push_back(unknown--);  // a host of its own: never grouped
      continue;
    }
    auto it = ids.emplace(hosts[slot], static_cast<int32_t>(ids.size())).first;
    topology.host_of.push_back(it->second);
  }
  return topology;
}

HostGroups GroupByHost(const MemberList& members, const SetTopology& topology, int32_t self) {
  HostGroups groups;
  if (topology.host_of.size() != members.size() || members.empty()) return groups;
  // Members of each host in set order (ascending ranks).
  std::map<int32_t, std::vector<size_t>> by_host;
  for (size_t i = 0; i < members.size(); ++i) by_host[topology.host_of[i]].push_back(i);
  const size_t per_host = by_host.begin()->second.size();
  if (by_host.size() < 2 || per_host < 2) return groups;
  for (const auto& [host, positions] : by_host)
    if (positions.size() != per_host) return groups;
  const size_t me = members.IndexOf(self);
  if (me >= members.size() || members[me] != self) return groups;
  const auto& mine = by_host.at(topology.host_of[me]);
  const size_t local_index = static_cast<size_t>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  std::vector<int32_t> local, cross;
  for (size_t p : mine) local.push_back(members[p]);
  for (const auto& [host, positions] : by_host) cross.push_back(members[positions[local_index]]);
  std::sort(cross.begin(), cross.end());
  groups.uniform = true;
  groups.hosts = by_host.size();
  groups.per_host = per_host;
  groups.local = MemberList(std::move(local));
  groups.cross = MemberList(std::move(cross));
  return groups;
}

const char* AlgorithmName(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kDirect: return "direct";
    case AllreduceAlgorithm::kRing: return "ring";
    case AllreduceAlgorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

namespace {

// Whether the set's shape allows the hierarchy at all; does not depend on which member asks.
bool Uniform(const MemberList& members, const SetTopology& topology) {
  return !members.empty() && GroupByHost(members, topology, members.front()).uniform;
}

}  // namespace

AllreduceAlgorithm ChooseAllreduce(const MemberList& members, const SetTopology* topology,
                                   size_t bytes, DType /*dtype*/, ReduceOp /*op*/) {
  const AllreduceAlgorithm flat =
      bytes <= kDirectAllreduceMaxBytes ? AllreduceAlgorithm::kDirect : AllreduceAlgorithm::kRing;
  if (topology == nullptr || topology->mode == HierarchyMode::kOff || bytes == 0) return flat;
  // The size first: small allreduces (the fast path's) never pay for looking at the hosts.
  if (topology->mode == HierarchyMode::kAuto && bytes < topology->min_bytes) return flat;
  return Uniform(members, *topology) ? AllreduceAlgorithm::kHierarchical : flat;
}

Status HierarchicalAllreduce(const RingArgs& ring, const HostGroups& groups, void* buffer,
                             size_t count, DType dtype, ReduceOp op) {
  const size_t element = ElementSize(dtype), local_n = groups.local.size();
  const size_t local_index = groups.local.IndexOf(ring.self);
  char* data = static_cast<char*>(buffer);
  const RingArgs local{ring.context, &groups.local, ring.self, ring.step_timeout, ring.scratch};
  const RingArgs cross{ring.context, &groups.cross, ring.self, ring.step_timeout, ring.scratch};
  // Phase 1: shift local_n - 1, so that local member j ends up holding chunk j complete (for
  // this host).
  const ChunkLayout shards = EvenChunks(count, local_n, element);
  TUTTI_RETURN_IF_ERROR(RingReduceScatter(local, data, shards, dtype, op, local_n - 1));
  // Phase 2: shard j across the hosts among the members of local index j. Every host's shard j
  // has the same bounds (same count, same local_n), and every member of the cross group picks
  // the same of the two algorithms from the shard's size.
  char* shard = data + shards.begin[local_index];
  const size_t shard_bytes = shards.size[local_index], shard_count = shard_bytes / element;
  if (shard_count > 0)
    TUTTI_RETURN_IF_ERROR(shard_bytes <= kDirectAllreduceMaxBytes
                              ? DirectAllreduce(cross, shard, shard_count, dtype, op)
                              : RingAllreduce(cross, shard, shard_count, dtype, op));
  // Phase 3: within the host; local member j starts with chunk j.
  return RingAllgather(local, data, shards, local_index);
}

Status ChosenAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       AllreduceAlgorithm* used) {
  const AllreduceAlgorithm algorithm =
      ChooseAllreduce(*ring.members, ring.topology, count * ElementSize(dtype), dtype, op);
  if (used) *used = algorithm;
  switch (algorithm) {
    case AllreduceAlgorithm::kDirect: return DirectAllreduce(ring, buffer, count, dtype, op);
    case AllreduceAlgorithm::kRing: return RingAllreduce(ring, buffer, count, dtype, op);
    case AllreduceAlgorithm::kHierarchical:
      return HierarchicalAllreduce(ring, GroupByHost(*ring.members, *ring.topology, ring.self),
                                   buffer, count, dtype, op);
  }
  return Status(Code::kInternal, "unknown allreduce algorithm");
}

}  // namespace tutti::client
