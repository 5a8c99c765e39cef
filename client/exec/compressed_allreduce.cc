#include "client/exec/compressed_allreduce.h"

#include <cstring>

#include "client/exec/collectives.h"
#include "client/exec/hierarchical.h"
#include "client/kernels/reduce.h"

namespace tutti::client {

using compress::Kind;

Status CastRingAllreduce(const RingArgs& ring, float* data, size_t count, Kind kind) {
  const MemberList& members = *ring.members;
  const size_t n = members.size(), i = members.IndexOf(ring.self);
  if (n == 1 || count == 0) return Status::Ok();
  const int32_t next = members.Next(ring.self), prev = members.Previous(ring.self);
  const ChunkLayout chunks = EvenChunks(count, n, 1);  // in elements
  const size_t largest = chunks.size[0];
  // The whole result in 16 bits, which the allgather fills; its first `largest` elements double
  // as the reduce-scatter's send area, the scratch as its receive area.
  std::vector<uint16_t> wire(count);
  ring.scratch->resize(largest * sizeof(uint16_t));
  uint16_t* received = reinterpret_cast<uint16_t*>(ring.scratch->data());
  std::vector<uint16_t> outgoing(largest);
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t send = (i + n - s) % n, recv = (i + 2 * n - s - 1) % n;
    compress::Encode(kind, data + chunks.begin[send], outgoing.data(), chunks.size[send]);
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(
        next, outgoing.data(), chunks.size[send] * sizeof(uint16_t), prev, received,
        chunks.size[recv] * sizeof(uint16_t), transport::Clock::now() + ring.step_timeout));
    compress::DecodeAdd(kind, received, data + chunks.begin[recv], chunks.size[recv]);
  }
  // This member holds chunk i + 1 complete: encode it once, pass the 16 bits around, decode all.
  const size_t owned = (i + 1) % n;
  compress::Encode(kind, data + chunks.begin[owned], wire.data() + chunks.begin[owned], chunks.size[owned]);
  ChunkLayout bytes;
  for (size_t c = 0; c < n; ++c) {
    bytes.begin.push_back(chunks.begin[c] * sizeof(uint16_t));
    bytes.size.push_back(chunks.size[c] * sizeof(uint16_t));
  }
  TUTTI_RETURN_IF_ERROR(RingAllgather(ring, reinterpret_cast<char*>(wire.data()), bytes, owned));
  compress::Decode(kind, wire.data(), data, count);
  return Status::Ok();
}

namespace {

const Request::Operation& Op(const FusedPart& part) { return part.request->operation(); }

// Top-k of every part (error-corrected), one allgather of all members' entries, then each
// member's entries added in set order into `sum` (zeroed here).
Status TopKAllreduce(const RingArgs& ring, const std::vector<const FusedPart*>& parts,
                     const std::vector<float*>& corrected, double ratio, float* sum) {
  const size_t n = ring.members->size(), self = ring.members->IndexOf(ring.self);
  std::vector<size_t> k, offset;  // per part: entries, and where its dense values start in sum
  size_t entries = 0, dense = 0;
  for (const FusedPart* part : parts) {
    k.push_back(compress::TopKCount(Op(*part).count, ratio));
    offset.push_back(dense);
    entries += k.back();
    dense += Op(*part).count;
  }
  std::vector<compress::SparseEntry> all(entries * n);
  compress::SparseEntry* mine = all.data() + entries * self;
  size_t at = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    compress::SelectTopK(corrected[p], Op(*parts[p]).count, k[p], mine + at);
    at += k[p];
  }
  ChunkLayout chunks;
  for (size_t m = 0; m < n; ++m) {
    chunks.begin.push_back(m * entries * sizeof(compress::SparseEntry));
    chunks.size.push_back(entries * sizeof(compress::SparseEntry));
  }
  TUTTI_RETURN_IF_ERROR(ChosenAllgather(ring, reinterpret_cast<char*>(all.data()), chunks));
  std::memset(sum, 0, dense * sizeof(float));
  for (size_t m = 0; m < n; ++m) {
    const compress::SparseEntry* from = all.data() + m * entries;
    for (size_t p = 0; p < parts.size(); ++p) {
      compress::ScatterAdd(from, k[p], sum + offset[p]);
      from += k[p];
    }
  }
  return Status::Ok();
}

}  // namespace

Status RunCompressedAllreduce(const RingArgs& ring, const std::vector<FusedPart>& parts,
                              CompressionState* state, std::vector<char>* buffer,
                              CompressionReport* report) {
  const wire::TensorSpec& spec = Op(parts.front()).spec;
  const wire::Compression& settings = spec.compression();
  const auto op = static_cast<ReduceOp>(spec.reduce_op());
  const size_t n = ring.members->size();
  const compress::AdaptiveSettings adaptive{static_cast<Kind>(settings.adaptive_compressor()),
                                            settings.adaptive_interval(),
                                            settings.adaptive_min_bytes(),
                                            settings.adaptive_max_change()};
  const bool is_adaptive = static_cast<Kind>(settings.kind()) == Kind::kAdaptive;
  const double ratio = settings.ratio();

  // Each part's kept state (top-k's error, the policy), looked up once; map entries stay put.
  std::vector<CompressionState::Tensor*> kept(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) kept[p] = &state->tensors[parts[p].request->name()];
  // The compressor of each part: fixed, or the policy's (the same on every member).
  report->used.assign(parts.size(), Kind::kNone);
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!is_adaptive) {
      report->used[p] = static_cast<Kind>(settings.kind());
      continue;
    }
    std::optional<compress::Decision> revisit;
    const std::string& name = parts[p].request->name();
    report->used[p] = kept[p]->policy.Choose(adaptive, Op(parts[p]).count * sizeof(float), &revisit);
    if (revisit) report->revisits.emplace_back(name, *revisit);
  }

  // One collective per compressor, in a fixed order, over the parts it covers laid end to end
  // in the fusion buffer (prescaled; top-k adds each tensor's error).
  for (Kind kind : {Kind::kNone, Kind::kFp16, Kind::kBf16, Kind::kTopK}) {
    std::vector<const FusedPart*> group;
    std::vector<CompressionState::Tensor*> group_kept;
    size_t total = 0;
    for (size_t p = 0; p < parts.size(); ++p)
      if (report->used[p] == kind) {
        group.push_back(&parts[p]);
        group_kept.push_back(kept[p]);
        total += Op(parts[p]).count;
      }
    if (group.empty()) continue;
    // Top-k needs the corrected inputs and the sum apart: twice the room.
    const size_t room = total * sizeof(float) * (kind == Kind::kTopK ? 2 : 1);
    if (buffer->size() < room) buffer->resize(room);
    float* values = reinterpret_cast<float*>(buffer->data());
    size_t offset = 0;
    std::vector<float*> corrected;
    for (size_t g = 0; g < group.size(); ++g) {
      const auto& o = Op(*group[g]);
      float* into = values + offset;
      ScaleCopy(into, o.input, o.count, DType::kFloat32, spec.prescale());
      if (kind == Kind::kTopK) {
        auto& error = group_kept[g]->error;
        if (error.size() != o.count) error.assign(o.count, 0.0f);  // new, or its size changed
        for (size_t j = 0; j < o.count; ++j) into[j] += error[j];
      }
      corrected.push_back(into);
      offset += o.count;
    }
    float* result = values;
    switch (kind) {
      case Kind::kNone:
        TUTTI_RETURN_IF_ERROR(ChosenAllreduce(ring, values, total, DType::kFloat32, ReduceOp::kSum));
        break;
      case Kind::kFp16:
      case Kind::kBf16:
        TUTTI_RETURN_IF_ERROR(CastRingAllreduce(ring, values, total, kind));
        break;
      default: {
        result = values + total;
        TUTTI_RETURN_IF_ERROR(TopKAllreduce(ring, group, corrected, ratio, result));
        // What SelectTopK left in the corrected inputs is the error for next time.
        offset = 0;
        for (CompressionState::Tensor* tensor : group_kept) {
          auto& error = tensor->error;
          std::memcpy(error.data(), values + offset, error.size() * sizeof(float));
          offset += error.size();
        }
      }
    }
    Finish(result, total, DType::kFloat32, op, spec.postscale(), n);
    offset = 0;
    for (size_t g = 0; g < group.size(); ++g) {
      const auto& o = Op(*group[g]);
      std::memcpy(o.output, result + offset, o.count * sizeof(float));
      if (is_adaptive) group_kept[g]->policy.Observe(adaptive, compress::Norm(result + offset, o.count));
      offset += o.count;
    }
  }
  return Status::Ok();
}

}  // namespace tutti::client
