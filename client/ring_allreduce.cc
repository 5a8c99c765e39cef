#include "client/ring_allreduce.h"

#include <algorithm>
#include <cstring>

#include "client/reduce.h"

namespace tutti::client {

size_t IndexOf(const std::vector<int32_t>& members, int32_t rank) {
  return static_cast<size_t>(std::lower_bound(members.begin(), members.end(), rank) -
                             members.begin());
}

ChunkLayout EvenChunks(size_t count, size_t n, size_t item_bytes) {
  ChunkLayout layout;
  for (size_t c = 0; c < n; ++c) {
    layout.begin.push_back((c * (count / n) + std::min(c, count % n)) * item_bytes);
    layout.size.push_back((count / n + (c < count % n ? 1 : 0)) * item_bytes);
  }
  return layout;
}

namespace {

struct Neighbours {
  size_t n, index;
  int32_t next, prev;
};

Neighbours Around(const RingArgs& ring) {
  const auto& m = *ring.members;
  const size_t n = m.size(), index = IndexOf(m, ring.self);
  return {n, index, m[(index + 1) % n], m[(index + n - 1) % n]};
}

}  // namespace

Status RingReduceScatter(const RingArgs& ring, char* data, const ChunkLayout& chunks, DType dtype,
                         ReduceOp op, size_t shift) {
  const Neighbours nb = Around(ring);
  if (nb.n == 1) return Status::Ok();
  ring.scratch->resize(*std::max_element(chunks.size.begin(), chunks.size.end()));
  const size_t element = ElementSize(dtype);
  for (size_t s = 0; s + 1 < nb.n; ++s) {
    const size_t send = (nb.index + shift + nb.n - s) % nb.n;
    const size_t recv = (nb.index + shift + 2 * nb.n - s - 1) % nb.n;
    char* into = data + chunks.begin[recv];
    const char* arrived = ring.scratch->data();
    // Reduce whole segments as they arrive, while the kernel goes on receiving and sending.
    size_t reduced = 0;
    auto reduce_up_to = [&](size_t bytes) {
      const size_t elements = (bytes - reduced) / element;
      ReduceInto(into + reduced, arrived + reduced, elements, dtype, op);
      reduced += elements * element;
    };
    auto on_received = [&](size_t received) {
      if (received - reduced >= kRingSegmentBytes) reduce_up_to(received);
    };
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(
        nb.next, data + chunks.begin[send], chunks.size[send], nb.prev, ring.scratch->data(),
        chunks.size[recv], transport::Clock::now() + ring.step_timeout, on_received));
    reduce_up_to(chunks.size[recv]);
  }
  return Status::Ok();
}

Status RingAllgather(const RingArgs& ring, char* data, const ChunkLayout& chunks, size_t owned) {
  const Neighbours nb = Around(ring);
  for (size_t s = 0; s + 1 < nb.n; ++s) {
    const size_t send = (owned + nb.n - s) % nb.n;
    const size_t recv = (owned + 2 * nb.n - s - 1) % nb.n;
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(
        nb.next, data + chunks.begin[send], chunks.size[send], nb.prev, data + chunks.begin[recv],
        chunks.size[recv], transport::Clock::now() + ring.step_timeout));
  }
  return Status::Ok();
}

Status DirectAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op) {
  const Neighbours nb = Around(ring);
  const size_t bytes = count * ElementSize(dtype);
  if (nb.n == 1 || bytes == 0) return Status::Ok();
  const auto& members = *ring.members;
  ring.scratch->resize(nb.n * bytes);
  char* slots = ring.scratch->data();
  std::memcpy(slots + nb.index * bytes, buffer, bytes);
  for (size_t s = 1; s < nb.n; ++s) {
    const size_t to = (nb.index + s) % nb.n, from = (nb.index + nb.n - s) % nb.n;
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(members[to], buffer, bytes, members[from],
                                                 slots + from * bytes, bytes,
                                                 transport::Clock::now() + ring.step_timeout));
  }
  std::memcpy(buffer, slots, bytes);
  for (size_t j = 1; j < nb.n; ++j) ReduceInto(buffer, slots + j * bytes, count, dtype, op);
  return Status::Ok();
}

Status RingAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op) {
  const size_t n = ring.members->size();
  if (n == 1 || count == 0) return Status::Ok();
  char* data = static_cast<char*>(buffer);
  const ChunkLayout chunks = EvenChunks(count, n, ElementSize(dtype));
  TUTTI_RETURN_IF_ERROR(RingReduceScatter(ring, data, chunks, dtype, op, 0));
  return RingAllgather(ring, data, chunks, (IndexOf(*ring.members, ring.self) + 1) % n);
}

}  // namespace tutti::client
