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
  for (auto& [host, positions] : by_host) groups.host_positions.push_back(std::move(positions));
  return groups;
}

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kNone: return "none";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

bool ChooseHierarchy(const MemberList& members, const SetTopology* topology, size_t bytes) {
  if (topology == nullptr || topology->mode == HierarchyMode::kOff || bytes == 0) return false;
  // The size first: small collectives (the fast path's) never pay for looking at the hosts.
  if (topology->mode == HierarchyMode::kAuto && bytes < topology->min_bytes) return false;
  // Whether the set's shape allows the hierarchy at all does not depend on which member asks.
  return !members.empty() && GroupByHost(members, *topology, members.front()).uniform;
}

Algorithm ChooseAllreduce(const MemberList& members, const SetTopology* topology, size_t bytes,
                          DType /*dtype*/, ReduceOp /*op*/, size_t small_allreduce_bytes) {
  if (ChooseHierarchy(members, topology, bytes)) return Algorithm::kHierarchical;
  return bytes <= small_allreduce_bytes ? Algorithm::kDirect : Algorithm::kRing;
}

Algorithm ChooseAllgather(const MemberList& members, const SetTopology* topology, size_t bytes) {
  return ChooseHierarchy(members, topology, bytes) ? Algorithm::kHierarchical : Algorithm::kRing;
}

Algorithm ChooseReducescatter(const MemberList& members, const SetTopology* topology, size_t bytes) {
  return ChooseHierarchy(members, topology, bytes) ? Algorithm::kHierarchical : Algorithm::kRing;
}

Algorithm ChooseBroadcast(const MemberList& members, const SetTopology* topology, size_t bytes) {
  return ChooseHierarchy(members, topology, bytes) ? Algorithm::kHierarchical : Algorithm::kTree;
}

namespace {

size_t TotalBytes(const ChunkLayout& chunks) {
  return chunks.size.empty() ? 0 : chunks.begin.back() + chunks.size.back();
}

Algorithm Record(const RingArgs& ring, Algorithm algorithm) {
  if (ring.ran) *ring.ran = algorithm;
  return algorithm;
}

HostGroups MyGroups(const RingArgs& ring) {
  return GroupByHost(*ring.members, *ring.topology, ring.self);
}

}  // namespace

Status ChosenAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       const Contribution& from) {
  switch (Record(ring, ChooseAllreduce(*ring.members, ring.topology, count * ElementSize(dtype),
                                       dtype, op, ring.cutoffs.small_allreduce_bytes))) {
    case Algorithm::kDirect: return DirectAllreduce(ring, buffer, count, dtype, op, from);
    case Algorithm::kHierarchical:
      return HierarchicalAllreduce(ring, MyGroups(ring), buffer, count, dtype, op, from);
    default: return RingAllreduce(ring, buffer, count, dtype, op, from);
  }
}

Status ChosenAllgather(const RingArgs& ring, char* data, const ChunkLayout& chunks) {
  if (Record(ring, ChooseAllgather(*ring.members, ring.topology, TotalBytes(chunks))) ==
      Algorithm::kHierarchical)
    return HierarchicalAllgather(ring, MyGroups(ring), data, chunks);
  return RingAllgather(ring, data, chunks, ring.members->IndexOf(ring.self));
}

Status ChosenReducescatter(const RingArgs& ring, char* data, const ChunkLayout& chunks,
                           DType dtype, ReduceOp op) {
  if (Record(ring, ChooseReducescatter(*ring.members, ring.topology, TotalBytes(chunks))) ==
      Algorithm::kHierarchical)
    return HierarchicalReducescatter(ring, MyGroups(ring), data, chunks, dtype, op);
  // Shifted by n - 1 so that member i ends up holding chunk i.
  return RingReduceScatter(ring, data, chunks, dtype, op, ring.members->size() - 1);
}

Status ChosenBroadcast(const RingArgs& ring, char* data, size_t bytes, int32_t root) {
  if (Record(ring, ChooseBroadcast(*ring.members, ring.topology, bytes)) == Algorithm::kHierarchical)
    return HierarchicalBroadcast(ring, MyGroups(ring), data, bytes, root);
  return TreeBroadcast(ring, data, bytes, root);
}

}  // namespace tutti::client
