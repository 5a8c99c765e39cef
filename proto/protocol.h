// Framing constants of the control plane and the one place frames are stamped and serialized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tutti.pb.h"

namespace tutti::wire {

constexpr uint32_t kMagic = 0x54555454;  // "TUTT"
// Bumped on any change a peer of the previous version cannot read (docs/wire-protocol.md).
// 2: SetReply.last_rank answers Join; 3: elastic jobs (PeerReport, Probe, Reformed; docs/elastic.md);
// 4: ranks added to elastic jobs (RanksWaiting, AtBoundary, Welcome.slot); 5: the members' fast
// path (Execute.fast_path, SetTensors.fast_path_exit; docs/steady-state.md); 6: HA groups
// (Frame.term, Redirect, Resume, Resumed, CacheState; docs/high-availability.md); 7: the
// data-plane handshake between ranks is mutual and keys sealed records (Hello v2, Proof;
// Register.data_security, PeerReport.integrity_failure; docs/security.md). Ranks of 6 and 7
// cannot connect to each other, so one job must not mix them; tuttid reads both alike.
constexpr uint32_t kProtocolVersion = 7;

// The algorithm cut-offs' built-in values (docs/algorithms.md), where neither a rank's setting
// nor an autotuned set says otherwise: allreduces of at most kDefaultSmallAllreduceBytes take the
// direct exchange; ring steps reduce in pieces of kDefaultPipelineBytes while the rest arrives.
constexpr int64_t kDefaultSmallAllreduceBytes = 16 << 10;
constexpr int64_t kDefaultPipelineBytes = 256 << 10;
// Upper bound on one frame; also the ZeroMQ ZMQ_MAXMSGSIZE of both ends.
constexpr int64_t kMaxFrameBytes = 16 << 20;

// "allreduce", "broadcast", ...
const char* KindName(CollectiveKind kind);

// Stamps magic, version and the sender's coordinator epoch (0 before it joined) into `frame` and
// serializes it.
std::string Encode(Frame& frame, uint64_t epoch = 0);

}  // namespace tutti::wire
