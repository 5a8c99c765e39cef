// Ring algorithms over a transport context. Each reduced chunk is computed once, by one rank, in a
// fixed order, then copied to everyone: every member ends with bitwise-identical results whatever
// the timing.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/member_list.h"
#include "proto/protocol.h"
#include "transport/transport.h"

namespace tutti::client {

// How a buffer splits into one chunk per member: byte offset and byte size of each.
struct ChunkLayout {
  std::vector<size_t> begin, size;
};

// `count` items of `item_bytes` each, split as evenly as possible: the first count % n chunks get
// one item more.
ChunkLayout EvenChunks(size_t count, size_t n, size_t item_bytes);

struct SetTopology;             // client/exec/hierarchical.h
enum class Algorithm : uint8_t;  // client/exec/hierarchical.h

// Ring reduce-scatter steps reduce what arrived in pieces of at least this size while the rest is
// still in flight (docs/algorithms.md).
constexpr size_t kRingSegmentBytes = wire::kDefaultPipelineBytes;

// Allreduces up to this many bytes with one direct exchange instead of the ring (measured on
// loopback: docs/algorithms.md).
constexpr size_t kDirectAllreduceMaxBytes = wire::kDefaultSmallAllreduceBytes;

// The two cut-offs a collective runs with: the job's (TUTTI_SMALL_ALLREDUCE_BYTES,
// TUTTI_PIPELINE_BYTES) or its set's autotuned values, the same on every member for one
// collective (docs/autotune.md).
struct AlgorithmCutoffs {
  size_t small_allreduce_bytes = kDirectAllreduceMaxBytes;
  size_t pipeline_bytes = kRingSegmentBytes;
};

// The ring step bounds each exchange with a neighbour; `scratch` is reused between calls.
// `topology`: the hosts of the members, for the hierarchical algorithms; null: flat only.
// `ran`: where the Chosen* functions (hierarchical.h) record the algorithm they ran, for the
// timeline; null: not recorded.
struct RingArgs {
  transport::Context* context;
  const MemberList* members;
  int32_t self;
  std::chrono::milliseconds step_timeout;
  std::vector<char>* scratch;
  const SetTopology* topology = nullptr;
  Algorithm* ran = nullptr;
  AlgorithmCutoffs cutoffs;
};

// This member's contribution to an allreduce that writes its result to a buffer other than its
// input, so that the input is read where it is instead of copied to the result first. `input`
// has the result buffer's layout and is only read; each element is scaled by `prescale` as it is
// read, with ScaleCopy's rounding, so the bits are those of a scaled copy reduced in place.
// input == nullptr: in place, the result buffer holds the contribution already scaled.
struct Contribution {
  const void* input = nullptr;
  double prescale = 1.0;
};

// Reduces chunk by chunk around the ring; afterwards this rank (at position i in members) holds
// the full reduction of chunk (i + 1 + shift) % n, the other chunks hold partial results. Out of
// place (`from`), chunk (i + shift) % n of `data`, which this rank sends first, holds nothing
// meant to be read (its scaled input, or what was there before).
Status RingReduceScatter(const RingArgs& ring, char* data, const ChunkLayout& chunks, DType dtype,
                         ReduceOp op, size_t shift, const Contribution& from = {});

// Passes chunks around the ring until every rank holds all of them; this rank starts with chunk
// `owned`.
Status RingAllgather(const RingArgs& ring, char* data, const ChunkLayout& chunks, size_t owned);


// Binomial tree from `root` (a member's rank): in round k the members that have the data
// (position relative to the root below 2^k) send all `bytes` of it 2^k positions further.
// ceil(log2 n) rounds; every member but the root receives once.
Status TreeBroadcast(const RingArgs& ring, char* data, size_t bytes, int32_t root);

// Latency-optimal for small buffers: every rank sends its whole buffer to every other (n - 1
// concurrent send/recv steps, no chunking) and then reduces all n of them in set order, so every
// rank computes the same bits. Out of place, the input is sent as it is (scaled into the scratch
// slot first where prescale is not 1) and the result is written to `buffer` only.
Status DirectAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                       const Contribution& from = {});

// The shared-memory ring's slice: each step of RelayAllreduce moves at most this much per chunk,
// so that a step fits in half a FIFO (transport/shm) and the ring never waits for room.
// Measured with the FIFO size (docs/transports.md).
constexpr size_t kRelaySliceBytes = 512 << 10;

// The ring allreduce without intermediate copies, where every member shares memory: each chunk
// is cut into slices, and the ring runs slice by slice, reducing straight out of the FIFO from
// the previous rank into the FIFO toward the next. Same chunks and the same order of operands
// per element as RingAllreduce, so the two give bitwise-identical results. Out of place, every
// byte of `buffer` is written once: the last reduce-scatter step and the allgather write it, the
// other steps combine the input straight into the FIFO.
Status RelayAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                      const Contribution& from = {});

// Reduces `count` elements across the members into `buffer`: in place, or out of place from
// `from.input` (RelayAllreduce where every member shares memory).
Status RingAllreduce(const RingArgs& ring, void* buffer, size_t count, DType dtype, ReduceOp op,
                     const Contribution& from = {});

}  // namespace tutti::client
