// Several tensors released as one fused response run as one collective over the lane's fusion
// buffer (docs/fusion.md): copy in (folding the prescale into the copy), one transport
// collective, copy out (folding the average and postscale into the copy).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/exec/request.h"
#include "client/exec/ring_allreduce.h"
#include "common/timeline.h"

namespace tutti::client {

struct FusedPart {
  std::shared_ptr<Request> request;
  std::vector<int64_t> member_rows;  // allgather: each member's rows of this tensor
  // The coordinator's choice for the whole collective (the same on every part).
  wire::DevicePath device_path = wire::DEVICE_PATH_HOST;
  int32_t device_group = 0;
  // The set's cut-offs when tuttid released it (or the fast path agreed on it): the same on every
  // member for this collective.
  AlgorithmCutoffs cutoffs;
  // An autotuned set's collective: the measurement period of the Execute that released it
  // (docs/autotune.md); the lane reports its execution time under it.
  bool tuned = false;
  uint32_t trial = 0;
  // A member has joined and takes part with a share built in host memory, as one collective:
  // the staged path must then run it whole, not in pieces.
  bool joined_member = false;
};

// Allgather and reducescatter fuse member-major, so that each member's chunk is contiguous: chunk
// j holds, tensor after tensor, the rows of each tensor that belong to member j.
struct MemberMajor {
  ChunkLayout chunks;
  std::vector<std::vector<size_t>> offset;  // [part][member]: byte offset inside the buffer
  std::vector<std::vector<int64_t>> rows;   // [part][member]
  std::vector<size_t> row_bytes;            // [part]
};
MemberMajor MemberMajorLayout(const std::vector<FusedPart>& parts, size_t n, bool reducescatter);

// Called at the end of each phase (COPY_IN, the collective, COPY_OUT) with its start time.
using PhaseObserver = std::function<void(const char* phase, Timeline::WallClock::time_point start)>;

// Runs `parts` (two or more tensors of one kind, dtype, op, scale factors and device) as one
// collective; `buffer` is the lane's fusion buffer, grown as needed and kept between calls.
Status RunFused(const RingArgs& ring, const std::vector<FusedPart>& parts,
                std::vector<char>* buffer, const PhaseObserver& observe);

}  // namespace tutti::client
