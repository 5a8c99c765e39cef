// The checks a submission passes before anything is queued: arguments the caller got wrong
// become kInvalidArgument (or kUnsupported, kDeviceUnavailable) naming the collective and the
// argument, on this rank alone and before any negotiation. A pure function of the arguments and
// the set's members, so that it is unit-tested in process (tests/client/submission_checks_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/exec/request.h"
#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::client {

// tutti.h's TUTTI_DEVICE_* (client/ does not include the public header).
constexpr int32_t kDeviceTypeCpu = 0;
constexpr int32_t kDeviceTypeCuda = 1;

struct TensorArgs {
  void* data = nullptr;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  int32_t device_type = kDeviceTypeCpu;
  int32_t device_index = 0;
  void* stream = nullptr;  // device tensors: the producer's stream (cudaStream_t)
};

// One collective as submitted. Which fields matter depends on `kind`: allreduce reads input and
// output; broadcast works in place on input; allgather, reducescatter and alltoall leave their
// result in the request; barrier reads nothing.
struct CollectiveArgs {
  wire::CollectiveKind kind = wire::COLLECTIVE_ALLREDUCE;
  std::string name;  // empty: automatic
  int32_t set_id = 0;
  TensorArgs input, output;
  int32_t reduce_op = 1;
  double prescale = 1.0, postscale = 1.0;
  int32_t root = -1;                     // broadcast; send and recv: the peer
  int32_t tag = 0;                       // send and recv
  std::optional<std::vector<int64_t>> splits;  // alltoall; none: equal splits
  int32_t priority = 0;                  // among tensors released together, higher first
  // Allreduce: tutti.h TUTTI_COMPRESSION_* and its parameters (kind 0: none).
  struct Compression {
    int32_t kind = 0;
    double ratio = 0.01;
    int32_t adaptive_compressor = 2;
    int32_t adaptive_interval = 10;
    int64_t adaptive_min_bytes = 65536;
    double adaptive_max_change = 0.2;
  } compression;
};

// Checks `args`, submitted by global rank `self` on a set of sorted `members`, and fills what the
// lane needs into `op`: the spec's kind-, shape- and dtype-dependent fields, the buffers and the
// element count. The name is the caller's (automatic names are given later). A CUDA tensor's
// device is checked to be usable (kDeviceUnavailable otherwise); its producer event is not
// recorded here.
Status CheckSubmission(const CollectiveArgs& args, int32_t self, const std::vector<int32_t>& members,
                       Request::Operation* op);

// A grouped call's tensors must all be on one device (Horovod refuses a group that mixes them):
// kInvalidArgument naming the first two that differ.
Status CheckGroupDevices(const CollectiveArgs& args, const std::vector<TensorArgs>& inputs);

}  // namespace tutti::client
