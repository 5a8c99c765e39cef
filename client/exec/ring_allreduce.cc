#include "client/exec/ring_allreduce.h"

#include <algorithm>
#include <cstring>

#include "client/kernels/reduce.h"
#include "client/kernels/stream_copy.h"

namespace tutti::client {

// A relay step must fit in half the room in flight, or the ring could stall with every FIFO full.
static_assert(transport::kRelayRoomBytes >= 2 * kRelaySliceBytes);

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
  const MemberList& m = *ring.members;
  return {m.size(), m.IndexOf(ring.self), m.Next(ring.self), m.Previous(ring.self)};
}

// Where this member's contribution to the bytes at `offset` of the result lies, and the factor
// still to apply to it: the input and its prescale out of place, the result itself in place.
struct Own {
  const char* base;
  double scale;
  const char* at(size_t offset) const { return base + offset; }
};

Own OwnOf(const void* result, const Contribution& from) {
  if (from.input == nullptr) return {static_cast<const char*>(result), 1.0};
  return {static_cast<const char*>(from.input), from.prescale};
}

// Where no other member contributes, the result is this member's contribution.
void TakeOwn(void* buffer, size_t count, DType dtype, const Contribution& from) {
  if (from.input != nullptr) ScaleCopy(buffer, from.input, count, dtype, from.prescale);
}

}  // namespace

Status RingReduceScatter(const RingArgs& ring, char* data, const ChunkLayout& chunks, DType dtype,
                         ReduceOp op, size_t shift, const Contribution& from) {
  const Neighbours nb = Around(ring);
  const size_t element = ElementSize(dtype);
  if (nb.n == 1) {
    for (size_t c = 0; c < chunks.size.size(); ++c)
      TakeOwn(data + chunks.begin[c], chunks.size[c] / element, dtype,
              {from.input ? static_cast<const char*>(from.input) + chunks.begin[c] : nullptr,
               from.prescale});
    return Status::Ok();
  }
  ring.scratch->resize(*std::max_element(chunks.size.begin(), chunks.size.end()));
  const Own own = OwnOf(data, from);
  for (size_t s = 0; s + 1 < nb.n; ++s) {
    const size_t send = (nb.index + shift + nb.n - s) % nb.n;
    const size_t recv = (nb.index + shift + 2 * nb.n - s - 1) % nb.n;
    // Step 0 sends this member's own chunk; out of place straight from the input, or, where it
    // must be scaled first, from a scaled copy in that chunk of `data`, which no step reads.
    const char* sent = data + chunks.begin[send];
    if (s == 0 && own.base != data) {
      sent = own.at(chunks.begin[send]);
      if (own.scale != 1.0) {
        ScaleCopy(data + chunks.begin[send], sent, chunks.size[send] / element, dtype, own.scale);
        sent = data + chunks.begin[send];
      }
    }
    // Every chunk is received once: its first combine reads the contribution (maybe the input).
    char* into = data + chunks.begin[recv];
    const char* mine = own.at(chunks.begin[recv]);
    const char* arrived = ring.scratch->data();
    // Reduce whole segments as they arrive, while the kernel goes on receiving and sending.
    size_t reduced = 0;
    auto reduce_up_to = [&](size_t bytes) {
      const size_t elements = (bytes - reduced) / element;
      ScaleReduce(into + reduced, mine + reduced, arrived + reduced, elements, dtype, op, own.scale);
      reduced += elements * element;
    };
    auto on_received = [&](size_t received) {
      if (received - reduced >= ring.cutoffs.pipeline_bytes) reduce_up_to(received);
    };
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(
        nb.next, sent, chunks.size[send], nb.prev, ring.scratch->data(),
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

Status TreeBroadcast(const RingArgs& ring, char* data, size_t bytes, int32_t root) {
  const MemberList& members = *ring.members;
  const size_t n = members.size();
  if (n == 1 || bytes == 0) return Status::Ok();
  const size_t base = members.IndexOf(root);
  const size_t rel = (members.IndexOf(ring.self) + n - base) % n;
  for (size_t mask = 1; mask < n; mask <<= 1) {
    const auto deadline = transport::Clock::now() + ring.step_timeout;
    if (rel < mask && rel + mask < n) {
      const int32_t to = members[(rel + mask + base) % n];
      TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(to, data, bytes, to, nullptr, 0, deadline));
    } else if (rel >= mask && rel < 2 * mask) {
      const int32_t from = members[(rel - mask + base) % n];
      TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(from, nullptr, 0, from, data, bytes, deadline));
    }
  }
  return Status::Ok();
}

Status DirectAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       const Contribution& contribution) {
  const Neighbours nb = Around(ring);
  const size_t bytes = count * ElementSize(dtype);
  if (nb.n == 1 || bytes == 0) {
    TakeOwn(buffer, count, dtype, contribution);
    return Status::Ok();
  }
  const auto& members = *ring.members;
  ring.scratch->resize(nb.n * bytes);
  char* slots = ring.scratch->data();
  // This member's slot holds what it sends. In place the buffer is about to be overwritten, so
  // it is copied; out of place an unscaled input serves as it is.
  const char* mine = slots + nb.index * bytes;
  if (contribution.input == nullptr)
    std::memcpy(slots + nb.index * bytes, buffer, bytes);
  else if (contribution.prescale != 1.0)
    ScaleCopy(slots + nb.index * bytes, contribution.input, count, dtype, contribution.prescale);
  else
    mine = static_cast<const char*>(contribution.input);
  const auto slot = [&](size_t j) { return j == nb.index ? mine : slots + j * bytes; };
  for (size_t s = 1; s < nb.n; ++s) {
    const size_t to = (nb.index + s) % nb.n, from = (nb.index + nb.n - s) % nb.n;
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(members[to], mine, bytes, members[from],
                                                 slots + from * bytes, bytes,
                                                 transport::Clock::now() + ring.step_timeout));
  }
  std::memcpy(buffer, slot(0), bytes);
  for (size_t j = 1; j < nb.n; ++j) ReduceInto(buffer, slot(j), count, dtype, op);
  return Status::Ok();
}

Status RelayAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                      const Contribution& from) {
  const Neighbours nb = Around(ring);
  const size_t n = nb.n, i = nb.index, element = ElementSize(dtype);
  char* data = static_cast<char*>(buffer);
  const Own own = OwnOf(buffer, from);
  // Out of place, `buffer` is written without being read, and, when large, past the caches
  // (stream_copy.h): the last reduce-scatter step combines into the FIFO toward the next rank and
  // streams that to `buffer`, and the allgather streams what arrives. The same bits either way.
  const bool stream = own.base != data && count * element >= kStreamingStoreMinBytes;
  struct FenceOnReturn {  // on every return, before the caller publishes the result
    bool streamed;
    ~FenceOnReturn() {
      if (streamed) StreamFence();
    }
  } fence{stream};
  const ChunkLayout chunks = EvenChunks(count, n, element);
  const size_t slice = std::max<size_t>(element, kRelaySliceBytes / element * element);
  const size_t slices = (chunks.size[0] + slice - 1) / slice;  // chunk 0 is the largest
  transport::Context& context = *ring.context;
  const auto deadline = [&] { return transport::Clock::now() + ring.step_timeout; };
  for (size_t k = 0; k < slices; ++k) {
    // Slice k of chunk c: its bytes [k * slice, (k + 1) * slice), maybe short or empty.
    const auto offset_of = [&](size_t c) { return chunks.begin[c] + std::min(k * slice, chunks.size[c]); };
    const auto at = [&](size_t c) { return data + offset_of(c); };
    const auto own_at = [&](size_t c) { return own.at(offset_of(c)); };
    const auto len = [&](size_t c) {
      return std::min(slice, chunks.size[c] - std::min(k * slice, chunks.size[c]));
    };
    // Reduce-scatter. Step 0 sends this rank's chunk i; step s forwards chunk i - s reduced with
    // what arrived for it; the last step keeps chunk i + 1, complete, and starts the allgather
    // by sending it. This member's contribution is read (and scaled, out of place) where it is
    // combined; only the last step and the allgather write `buffer`.
    const char* mine = own_at(i);
    TUTTI_RETURN_IF_ERROR(context.Relay(nb.next, -1, len(i), element, deadline(),
                                        [&](const char*, char* out, size_t offset, size_t bytes) {
                                          ScaleCopy(out, mine + offset, bytes / element, dtype, own.scale);
                                        }));
    for (size_t s = 1; s + 1 < n; ++s) {
      const char* partial = own_at((i + n - s) % n);
      TUTTI_RETURN_IF_ERROR(context.Relay(
          nb.next, nb.prev, len((i + n - s) % n), element, deadline(),
          [&](const char* in, char* out, size_t offset, size_t bytes) {
            ScaleReduce(out, partial + offset, in, bytes / element, dtype, op, own.scale);
          }));
    }
    char* owned = at((i + 1) % n);
    const char* last = own_at((i + 1) % n);
    TUTTI_RETURN_IF_ERROR(context.Relay(nb.next, nb.prev, len((i + 1) % n), element, deadline(),
                                        [&](const char* in, char* out, size_t offset, size_t bytes) {
                                          if (stream) {
                                            ScaleReduce(out, last + offset, in, bytes / element, dtype, op,
                                                        own.scale);
                                            StreamCopy(owned + offset, out, bytes);
                                            return;
                                          }
                                          ScaleReduce(owned + offset, last + offset, in, bytes / element,
                                                      dtype, op, own.scale);
                                          std::memcpy(out, owned + offset, bytes);
                                        }));
    // Allgather: take chunk i - s and pass it on, but for the last one, which the next rank has.
    for (size_t s = 0; s + 1 < n; ++s) {
      char* into = at((i + n - s) % n);
      TUTTI_RETURN_IF_ERROR(context.Relay(s + 2 < n ? nb.next : -1, nb.prev, len((i + n - s) % n),
                                          element, deadline(),
                                          [&](const char* in, char* out, size_t offset, size_t bytes) {
                                            if (out) std::memcpy(out, in, bytes);
                                            if (stream)
                                              StreamCopy(into + offset, in, bytes);
                                            else
                                              std::memcpy(into + offset, in, bytes);
                                          }));
    }
  }
  return Status::Ok();
}

Status RingAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                     const Contribution& from) {
  const size_t n = ring.members->size();
  if (n == 1 || count == 0) {
    TakeOwn(buffer, count, dtype, from);
    return Status::Ok();
  }
  if (ring.context->CanRelayInPlace(ring.members->ranks()))
    return RelayAllreduce(ring, buffer, count, dtype, op, from);
  char* data = static_cast<char*>(buffer);
  const ChunkLayout chunks = EvenChunks(count, n, ElementSize(dtype));
  // Chunk i + 1 ends complete here and the allgather overwrites every other, so out of place each
  // byte of the result is written by a combine or a copy, never by a copy of the input.
  TUTTI_RETURN_IF_ERROR(RingReduceScatter(ring, data, chunks, dtype, op, 0, from));
  return RingAllgather(ring, data, chunks, (ring.members->IndexOf(ring.self) + 1) % n);
}

}  // namespace tutti::client
