#include "client/ring_allreduce.h"

#include <algorithm>

#include "client/reduce.h"

namespace tutti::client {

Status RingAllreduce(transport::Context& context, const std::vector<int32_t>& members, int32_t self,
                     void* buffer, size_t count, DType dtype, ReduceOp op,
                     std::chrono::milliseconds step_timeout, std::vector<char>* scratch) {
  const size_t n = members.size();
  if (n == 1 || count == 0) return Status::Ok();
  const size_t index = static_cast<size_t>(
      std::lower_bound(members.begin(), members.end(), self) - members.begin());
  const int32_t next = members[(index + 1) % n];
  const int32_t prev = members[(index + n - 1) % n];
  const size_t element = ElementSize(dtype);
  char* data = static_cast<char*>(buffer);

  // Chunk c holds count/n elements, plus one for the first count%n chunks.
  auto chunk_begin = [&](size_t c) { return c * (count / n) + std::min(c, count % n); };
  auto chunk_size = [&](size_t c) { return count / n + (c < count % n ? 1 : 0); };
  auto chunk_at = [&](size_t c) { return data + chunk_begin(c) * element; };
  scratch->resize(chunk_size(0) * element);

  auto step = [&](size_t send_chunk, size_t recv_chunk, void* recv_into) {
    return context.SendRecv(next, chunk_at(send_chunk), chunk_size(send_chunk) * element, prev,
                            recv_into, chunk_size(recv_chunk) * element,
                            transport::Clock::now() + step_timeout);
  };

  // Reduce-scatter: after n-1 steps this rank holds the full reduction of chunk index+1.
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t send_chunk = (index + n - s) % n;
    const size_t recv_chunk = (index + n - s - 1) % n;
    TUTTI_RETURN_IF_ERROR(step(send_chunk, recv_chunk, scratch->data()));
    ReduceInto(chunk_at(recv_chunk), scratch->data(), chunk_size(recv_chunk), dtype, op);
  }
  // Allgather: pass the reduced chunks around the ring, straight into place.
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t send_chunk = (index + 1 + n - s) % n;
    const size_t recv_chunk = (index + n - s) % n;
    TUTTI_RETURN_IF_ERROR(step(send_chunk, recv_chunk, chunk_at(recv_chunk)));
  }
  return Status::Ok();
}

}  // namespace tutti::client
