// The input format of fuzz_coordinator_core, shared with make_seeds: a sequence of records, each
// either a frame from one of a few fake ranks or time passing.
//
//   record := tag:u8 [length:u16 little-endian, payload:length bytes]
//   tag bits 0-1: which fake peer (routing id) sends the frame
//   tag bits 2-3: what happens
//       0: HandleFrame(payload)
//       1: HandleFrame(payload), then Flush (what tuttid does once its socket is drained)
//       2: HandleFrame(payload), then Flush and Tick
//       3: no frame (and no length nor payload): Flush and Tick
//   tag bits 4-7: the fake clock first advances by kAdvanceMs[bits] milliseconds
//
// A record cut short by the end of the input is ignored. At the end the harness flushes, lets ten
// minutes pass (Tick) and stops the coordinator (GoingAway).
#pragma once

#include <cstdint>
#include <string>

namespace tutti::fuzz {

constexpr int kPeers = 4;

enum Op : uint8_t { kFrame = 0, kFrameFlush = 1, kFrameFlushTick = 2, kTick = 3 };

constexpr int64_t kAdvanceMs[16] = {0,    1,    5,     20,    50,    100,   250,    500,
                                    1000, 2000, 5000, 10000, 30000, 60000, 120000, 600000};

// The coordinator the harness drives, and its settings, which seeds must match (the epoch they
// stamp into frames after the Welcome, timeouts that make their sequences complete).
constexpr uint64_t kEpoch = 0x7475747469ull;
constexpr int64_t kRendezvousTimeoutMs = 3000;
constexpr int64_t kHeartbeatMs = 100;
constexpr int64_t kLeaseMs = 1000;
constexpr int64_t kStallWarningMs = 2000;
constexpr int64_t kStallShutdownMs = 5000;
constexpr size_t kMaxJobs = 8;
// Registrations declaring a larger world are not passed to the coordinator (see LargeWorld in
// fuzz_coordinator_core.cc).
constexpr int32_t kMaxWorldSize = 4096;

inline uint8_t Tag(int peer, Op op, int advance = 0) {
  return static_cast<uint8_t>((peer & 3) | (op << 2) | ((advance & 15) << 4));
}

// Appends one record to `input`.
inline void AppendFrame(std::string* input, int peer, const std::string& frame, Op op = kFrameFlush,
                        int advance = 0) {
  input->push_back(static_cast<char>(Tag(peer, op, advance)));
  input->push_back(static_cast<char>(frame.size() & 0xff));
  input->push_back(static_cast<char>((frame.size() >> 8) & 0xff));
  input->append(frame);
}

inline void AppendTick(std::string* input, int advance) {
  input->push_back(static_cast<char>(Tag(0, kTick, advance)));
}

}  // namespace tutti::fuzz
