// Every frame tuttid sends, built in one place: jobs and the coordinator core decide what to say
// (a status, a set's members, an Execute's responses) and these builders put it into the frame
// the rank's coordinator link reads (client/control/coordinator_link.cc, the other end). The
// envelope (magic, version, epoch) is stamped when the frame is encoded (proto/protocol.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::server::frames {

// A registration refused (set 0, no tensor), or one announced tensor refused.
wire::Frame Refusal(const Status& status, int32_t set_id = 0, const std::string& tensor = "");
// The answer to a SetAdd or SetRemove: the set's id and members, or the error.
wire::Frame SetReply(uint64_t request_id, int32_t set_id, const Status& status,
                     const std::vector<int32_t>& members);
// The answer to a Join: the rank that joined last, or the error.
wire::Frame JoinReply(uint64_t request_id, int32_t set_id, const Status& status, int32_t last_rank);
// Ranks declared lost, with the status their sets fail with; none lost: tuttid itself goes away.
wire::Frame Fault(const std::vector<int32_t>& lost_ranks, const Status& status);
// Process sets broken with no rank lost (a member lost its data-plane connection to a rank that
// still answers tuttid; or a rank left a set that was on its members' fast path).
wire::Frame SetsBroken(const std::vector<int32_t>& set_ids, const Status& status,
                       bool orderly = false);
// Is the rank's I/O thread alive? It echoes the frame.
wire::Frame Probe(uint64_t nonce);
wire::Frame Reformed(wire::Reformed reformed);
// `count` ranks wait to join the elastic job (0: none any longer).
wire::Frame RanksWaiting(int32_t count);
wire::Frame Welcome(wire::Welcome welcome);
wire::Frame Execute(wire::Execute execute);
// A set's NCCL unique id, relayed unchanged from its first member.
wire::Frame CommId(const wire::CommId& relayed);
// The answer to a CountersQuery.
wire::Frame Counters(uint64_t request_id, wire::CoordinatorCounters counters);
// The echo of a rank's heartbeat.
wire::Frame Heartbeat();

}  // namespace tutti::server::frames
