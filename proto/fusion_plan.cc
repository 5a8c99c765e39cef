#include "proto/fusion_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/dtype.h"
#include "proto/status_codec.h"

namespace tutti::wire {
namespace {

bool Fusible(const Response& r) {
  if (Failed(r) || r.partial()) return false;
  const auto kind = r.spec().kind();
  return kind == COLLECTIVE_ALLREDUCE || kind == COLLECTIVE_ALLGATHER ||
         kind == COLLECTIVE_REDUCESCATTER;
}

// Tensors that may share one collective have equal keys: the same device path and device group
// (every member's tensors on the same GPU, or in host memory), not merely the same device index.
// Compressed allreduces fuse only with the same compression settings.
using Key = std::tuple<int, int32_t, int32_t, double, double, int, int32_t, std::string>;
Key KeyOf(const Response& r) {
  const TensorSpec& s = r.spec();
  return {s.kind(),          s.dtype(),          s.reduce_op(),
          s.prescale(),      s.postscale(),      r.device_path(),
          r.device_group(),  s.compression().SerializeAsString()};
}

// How many non-fitting candidates one fused response may look past: bounds the planning cost of
// a huge batch while still letting mixed-size models fill their buffers.
constexpr size_t kMaxLookahead = 4096;

}  // namespace

int64_t FusionBytes(const TensorSpec& spec,
                    const google::protobuf::RepeatedField<int64_t>& member_rows) {
  // Validated shapes keep one member's tensor far below 2^63 bytes, but an allgather's rows add
  // up over members: saturate, so that a tensor too large to count is never fused.
  auto times = [](int64_t a, int64_t b) {
    int64_t product;
    return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
  };
  int64_t bytes = static_cast<int64_t>(ElementSize(static_cast<DType>(spec.dtype())));
  if (spec.kind() == COLLECTIVE_ALLGATHER) {
    for (int d = 1; d < spec.shape_size(); ++d) bytes = times(bytes, spec.shape(d));
    int64_t rows = 0;
    for (int64_t r : member_rows)
      if (__builtin_add_overflow(rows, r, &rows)) rows = INT64_MAX;
    return times(bytes, rows);
  }
  for (int64_t d : spec.shape()) bytes = times(bytes, d);
  return bytes;
}

std::vector<Response> PlanCollectives(std::vector<Response> released,
                                            int64_t threshold) {
  // Higher priority first; equal priorities keep release order (and groups their index order).
  std::stable_sort(released.begin(), released.end(),
                   [](const Response& a, const Response& b) {
                     return a.spec().priority() > b.spec().priority();
                   });
  if (threshold <= 0 || released.size() < 2) return released;

  const size_t n = released.size();
  std::vector<int64_t> bytes(n, 0);
  std::map<Key, std::vector<size_t>> by_key;  // fusible responses, in order
  for (size_t i = 0; i < n; ++i) {
    if (!Fusible(released[i])) continue;
    bytes[i] = FusionBytes(released[i].spec(), released[i].member_rows());
    if (bytes[i] < threshold) by_key[KeyOf(released[i])].push_back(i);
  }
  std::vector<bool> taken(n, false);
  std::map<Key, size_t> cursor;  // per key: where the untaken candidates start
  std::vector<Response> planned;
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    Response head = std::move(released[i]);
    if (Fusible(head) && bytes[i] < threshold) {
      const Key key = KeyOf(head);
      const std::vector<size_t>& candidates = by_key[key];
      size_t& from = cursor[key];
      while (from < candidates.size() && taken[candidates[from]]) ++from;
      int64_t total = bytes[i];
      size_t skipped = 0;
      for (size_t k = from; k < candidates.size(); ++k) {
        const size_t j = candidates[k];
        if (taken[j]) continue;
        if (bytes[j] > threshold - total) {  // total <= threshold: no overflow
          if (++skipped > kMaxLookahead) break;
          continue;  // look past it: a smaller tensor further on may still fit
        }
        total += bytes[j];
        taken[j] = true;
        auto* part = head.add_fused();
        part->set_name(released[j].spec().name());
        part->mutable_member_rows()->Swap(released[j].mutable_member_rows());
        part->set_cache_slot(released[j].cache_slot());
      }
    }
    planned.push_back(std::move(head));
  }
  return planned;
}

}  // namespace tutti::wire
