// Allreduces the library compresses on the wire (docs/compression.md): fp16 and bf16 rings that
// accumulate in float32, top-k with error feedback, and the adaptive policy choosing per tensor.
// The pure parts live in client/compress/; this runs them over the set's transport context.
// Threads: the set's lane thread only; a CompressionState belongs to one lane (one set
// incarnation: an elastic re-formation starts a new lane, so every member starts afresh alike).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/compress/adaptive_policy.h"
#include "client/compress/codecs.h"
#include "client/exec/fused_collectives.h"
#include "client/exec/ring_allreduce.h"

namespace tutti::client {

// What a lane keeps between allreduces, per tensor name: top-k's error and the adaptive policy.
struct CompressionState {
  struct Tensor {
    std::vector<float> error;  // top-k: what was not sent yet, sized to the tensor
    compress::TensorPolicy policy;
  };
  std::map<std::string, Tensor> tensors;
};

// What one compressed collective did, for the timeline and the set's counters.
struct CompressionReport {
  std::vector<compress::Kind> used;  // per part: the compressor that ran (kNone: exact)
  std::vector<std::pair<std::string, compress::Decision>> revisits;  // adaptive revisits
};

// Runs `parts` (one tensor, or several fused, float32 host tensors of one compression setting,
// op sum or average) compressed as their spec says. Parts sharing a compressor run as one
// collective; exact ones as the ordinary allreduce. `buffer`: the lane's fusion buffer.
Status RunCompressedAllreduce(const RingArgs& ring, const std::vector<FusedPart>& parts,
                              CompressionState* state, std::vector<char>* buffer,
                              CompressionReport* report);

// The ring allreduce of `count` float32 values sending 16-bit values (kFp16 or kBf16): each
// reduce-scatter step adds the decoded 16-bit partial it received to this member's float32
// values and sends the sum encoded; the owner of each complete chunk encodes it once and the
// allgather passes those 16 bits around, so every member decodes the same bits.
Status CastRingAllreduce(const RingArgs& ring, float* data, size_t count, compress::Kind kind);

}  // namespace tutti::client
