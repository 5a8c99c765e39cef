// The frames a simulated rank sends to tuttid, built from the real schema (proto/tutti.proto) and
// stamped by the encoders the rank's coordinator link uses (proto/protocol.h: wire::Encode,
// proto/cache_bits.h: wire::EncodeCacheBits), and cheap readers of what tuttid sends back.
// Pure functions: no sockets, no state, callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/protocol.h"

namespace tutti::bench {

// What every rank of one simulated job registers with. Defaults are the client's
// (client/runtime_options.h): 1 MiB fusion threshold, 1024 cache slots.
struct JobShape {
  std::string job;
  std::string token = "scale";
  int32_t size = 0;
  int32_t ranks_per_host = 8;  // ranks r and r' share a host identity when r / 8 == r' / 8
  std::vector<std::vector<int32_t>> static_sets;
  int64_t fusion_threshold = 1 << 20;
  int32_t cache_capacity = 1024;
  int64_t rendezvous_timeout_ms = 600000;
};

// The coordinator-side identity of a rank's link: 16 bytes starting with 't', unique per
// (job index, rank) and random-looking, as client/control/coordinator_link.cc draws them.
std::string RoutingId(int job_index, int32_t rank);

// Register, with the members' fast path off (Register.no_fast_path, TUTTI_FAST_PATH=0): every
// step goes through tuttid, which is what this benchmark measures.
std::string RegisterFrame(const JobShape& job, int32_t rank);

// The step's tensors: `count` float32 allreduces named like a model's gradients, of 256 to 4096
// elements, so that the client's default fusion threshold fuses them into a few collectives.
std::vector<wire::TensorSpec> StepTensors(int count);

// What a rank stamps on every frame after its Welcome (CoordinatorLink::Stamp).
struct Stamp {
  uint64_t coordinator_epoch = 0;
  uint64_t membership_epoch = 0;
};
std::string AnnounceFull(const Stamp& stamp, int32_t set_id,
                         const std::vector<wire::TensorSpec>& specs);
// Every tensor as its response-cache bit (docs/response-cache.md).
std::string AnnounceCached(const Stamp& stamp, int32_t set_id, const std::vector<uint32_t>& slots);
std::string SetAddFrame(const Stamp& stamp, uint64_t request_id, const std::vector<int32_t>& ranks,
                        int64_t timeout_ms);
std::string SetRemoveFrame(const Stamp& stamp, uint64_t request_id, int32_t set_id,
                           int64_t timeout_ms);
std::string JoinFrame(const Stamp& stamp, uint64_t request_id, int32_t set_id, int64_t timeout_ms);
std::string ByeFrame(const Stamp& stamp);

// A Welcome read at the wire level, its peers counted but not materialized: a real rank parses
// its own, but one process parsing thousands of them (O(ranks^2) bytes) would measure itself
// rather than tuttid. Handles a Welcome split over several occurrences of the field, which
// protobuf merges.
struct WelcomeSummary {
  bool welcome = false;  // the frame is a Welcome (not a Refusal or anything else)
  size_t bytes = 0;      // the whole frame's
  int peers = 0;
  int static_sets = 0;
  int32_t local_rank = 0, local_size = 0, cross_rank = 0, cross_size = 0;
  uint64_t coordinator_epoch = 0, membership_epoch = 0;
};
bool SummarizeWelcome(const void* data, size_t size, WelcomeSummary* summary);

// The tensors an Execute releases: its responses and the tensors fused into them.
int TensorsReleased(const wire::Execute& execute);

}  // namespace tutti::bench
