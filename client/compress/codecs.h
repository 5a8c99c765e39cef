// The pure parts of the library's gradient compression (docs/compression.md): 16-bit codecs and
// top-k selection with error feedback. No transport and no threads: client/exec/
// compressed_allreduce.cc runs them over the ring, and tests call them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tutti::client::compress {

// tutti.h TUTTI_COMPRESSION_*.
enum class Kind : int32_t { kNone = 0, kFp16 = 1, kBf16 = 2, kTopK = 3, kAdaptive = 4 };
const char* KindName(Kind kind);  // "none", "fp16", "bf16", "topk", "adaptive"

// float32 -> 16 bits, round to nearest even (kFp16 or kBf16).
void Encode(Kind kind, const float* in, uint16_t* out, size_t n);
// 16 bits -> float32, exact.
void Decode(Kind kind, const uint16_t* in, float* out, size_t n);
// acc[i] += Decode(in[i]): a 16-bit partial sum added to a float32 one.
void DecodeAdd(Kind kind, const uint16_t* in, float* acc, size_t n);

// How many of `n` elements top-k sends at `ratio`: ceil(ratio * n), at least 1 (for n > 0) and
// at most n. Every member computes it from the same n and ratio.
size_t TopKCount(size_t n, double ratio);

// One top-k selection as sent on the wire: an index and a value per kept element.
struct SparseEntry {
  uint32_t index;
  float value;
};
static_assert(sizeof(SparseEntry) == 8, "the wire layout of a sparse entry");

// Error feedback: `corrected` holds input + the error kept from earlier steps. Picks the k
// elements of largest magnitude (ties: the lower index), writes them to `out` in ascending index
// order, and leaves in `corrected` what was not sent (the picked elements become 0): the error
// to add to the next step's input.
void SelectTopK(float* corrected, size_t n, size_t k, SparseEntry* out);

// Adds every member's entries into `dense` (n elements, zeroed by the caller), member by member
// in set order, so that every member computes the same bits.
void ScatterAdd(const SparseEntry* entries, size_t count, float* dense);

}  // namespace tutti::client::compress
