// Decoding and validation of frames a rank sends to tuttid, apart from any socket, so that tests and
// fuzzers can drive it directly. A frame that passes holds only values the rest of the server can
// use without further range checks (rank lists are still checked against the world by the
// process-set table, which names offending ranks).
#pragma once

#include <cstddef>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::server {

// Limits on what one frame may ask for; beyond them the frame is refused as invalid.
constexpr int kMaxNameBytes = 1024;
constexpr int kMaxJobIdBytes = 256;
constexpr int kMaxDims = 16;
constexpr int32_t kMaxWorldSize = 1 << 20;
constexpr int kMaxStaticSets = 4096;
constexpr int kMaxTensorsPerAnnounce = 65536;
constexpr int32_t kMaxCacheCapacity = 1 << 20;
constexpr size_t kDeviceUuidBytes = 16;  // TensorSpec.device_uuid, when given
constexpr size_t kMaxCommIdBytes = 512;  // CommId.id (NCCL's unique id has 128)
// Timeouts and stall thresholds, in milliseconds (about 34 years): a deadline `now + timeout` in
// nanoseconds of the steady clock stays far from overflowing.
constexpr int64_t kMaxTimeoutMs = int64_t{1} << 40;

// Parses `size` bytes into `frame` and validates it. Errors: kVersionMismatch for a protocol version
// tuttid does not serve (proto/versions.h), kInvalidArgument (with the reason) for anything else.
Status DecodeClientFrame(const void* data, size_t size, wire::Frame* frame);

// Checks one announced tensor: name, kind, dtype, reduce op, dimensions, total size.
Status ValidateTensorSpec(const wire::TensorSpec& spec);

}  // namespace tutti::server
