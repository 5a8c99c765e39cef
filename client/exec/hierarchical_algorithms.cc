// The phases of the hierarchical collectives (hierarchical.h). Each phase is a flat algorithm
// (ring_allreduce.h) run over one of the member's two groups: `local`, its host, or `cross`, the
// members of its local index on every host. Every member runs the same phases in the same order,
// so each pair of members exchanges in one phase only, in the order both expect.
#include "client/exec/hierarchical.h"

namespace tutti::client {

namespace {

RingArgs Over(const RingArgs& ring, const MemberList& group) {
  RingArgs over{ring.context, &group, ring.self, ring.step_timeout, ring.scratch};
  over.cutoffs = ring.cutoffs;
  return over;
}

// The chunks of `positions` (members' positions in the set), in that order.
ChunkLayout Pick(const ChunkLayout& chunks, const std::vector<size_t>& positions) {
  ChunkLayout picked;
  for (size_t p : positions) {
    picked.begin.push_back(chunks.begin[p]);
    picked.size.push_back(chunks.size[p]);
  }
  return picked;
}

// The set positions of the cross group's members, in the cross group's order.
std::vector<size_t> CrossPositions(const RingArgs& ring, const HostGroups& groups) {
  std::vector<size_t> positions;
  for (int32_t rank : groups.cross) positions.push_back(ring.members->IndexOf(rank));
  return positions;
}

}  // namespace

Status HierarchicalAllreduce(const RingArgs& ring, const HostGroups& groups, void* buffer,
                             size_t count, DType dtype, ReduceOp op, const Contribution& from) {
  const size_t element = ElementSize(dtype), local_n = groups.local.size();
  const size_t local_index = groups.local.IndexOf(ring.self);
  char* data = static_cast<char*>(buffer);
  const RingArgs local = Over(ring, groups.local), cross = Over(ring, groups.cross);
  // Phase 1: shift local_n - 1, so that local member j ends up holding chunk j complete (for
  // this host). Out of place it reads the input and leaves partial sums in `data`, which the
  // later phases work on.
  const ChunkLayout shards = EvenChunks(count, local_n, element);
  TUTTI_RETURN_IF_ERROR(RingReduceScatter(local, data, shards, dtype, op, local_n - 1, from));
  // Phase 2: shard j across the hosts among the members of local index j. Every host's shard j
  // has the same bounds (same count, same local_n), and every member of the cross group picks
  // the same of the two algorithms from the shard's size.
  char* shard = data + shards.begin[local_index];
  const size_t shard_bytes = shards.size[local_index], shard_count = shard_bytes / element;
  if (shard_count > 0)
    TUTTI_RETURN_IF_ERROR(shard_bytes <= ring.cutoffs.small_allreduce_bytes
                              ? DirectAllreduce(cross, shard, shard_count, dtype, op)
                              : RingAllreduce(cross, shard, shard_count, dtype, op));
  // Phase 3: within the host; local member j starts with chunk j.
  return RingAllgather(local, data, shards, local_index);
}

Status HierarchicalAllgather(const RingArgs& ring, const HostGroups& groups, char* data,
                             const ChunkLayout& chunks) {
  const RingArgs local = Over(ring, groups.local), cross = Over(ring, groups.cross);
  // Phase 1: across hosts, this member's chunk to the members of its local index, theirs to it.
  TUTTI_RETURN_IF_ERROR(RingAllgather(cross, data, Pick(chunks, CrossPositions(ring, groups)),
                                      groups.cross.IndexOf(ring.self)));
  // Phase 2: this member now holds the chunk of local index j on every host; the host's ring
  // passes them around, one host's chunks at a time (each chunk is contiguous, a host's are not
  // in general).
  const size_t local_index = groups.local.IndexOf(ring.self);
  for (const auto& host : groups.host_positions)
    TUTTI_RETURN_IF_ERROR(RingAllgather(local, data, Pick(chunks, host), local_index));
  return Status::Ok();
}

Status HierarchicalReducescatter(const RingArgs& ring, const HostGroups& groups, char* data,
                                 const ChunkLayout& chunks, DType dtype, ReduceOp op) {
  const RingArgs local = Over(ring, groups.local), cross = Over(ring, groups.cross);
  // Phase 1: for each host's chunks, the host ring leaves local member j holding the chunk of
  // local index j on that host, reduced over this host's copies.
  const size_t per_host = groups.per_host;
  for (const auto& host : groups.host_positions)
    TUTTI_RETURN_IF_ERROR(RingReduceScatter(local, data, Pick(chunks, host), dtype, op, per_host - 1));
  // Phase 2: across hosts, the per-host partial sums of the chunks of this local index; shifted
  // so that every member ends with its own chunk.
  return RingReduceScatter(cross, data, Pick(chunks, CrossPositions(ring, groups)), dtype, op,
                           groups.hosts - 1);
}

Status HierarchicalBroadcast(const RingArgs& ring, const HostGroups& groups, char* data,
                             size_t bytes, int32_t root) {
  const RingArgs local = Over(ring, groups.local), cross = Over(ring, groups.cross);
  const size_t root_position = ring.members->IndexOf(root);
  const std::vector<size_t>* root_host = nullptr;
  for (const auto& host : groups.host_positions)
    for (size_t p : host)
      if (p == root_position) root_host = &host;
  if (root_host == nullptr) return Status(Code::kInternal, "the broadcast root is not a member");
  const bool on_root_host = groups.local.Contains(root);
  // Phase 1: the whole buffer to every member of the root's host.
  if (on_root_host) TUTTI_RETURN_IF_ERROR(TreeBroadcast(local, data, bytes, root));
  // Phase 2: slice j from the root host's member of local index j to that index on every host.
  const size_t local_index = groups.local.IndexOf(ring.self);
  const ChunkLayout slices = EvenChunks(bytes, groups.per_host, 1);
  const int32_t cross_root = (*ring.members)[(*root_host)[local_index]];
  TUTTI_RETURN_IF_ERROR(TreeBroadcast(cross, data + slices.begin[local_index],
                                      slices.size[local_index], cross_root));
  // Phase 3: the other hosts assemble the slices.
  if (on_root_host) return Status::Ok();
  return RingAllgather(local, data, slices, local_index);
}

}  // namespace tutti::client
