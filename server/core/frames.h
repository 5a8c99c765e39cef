// Every frame tuttid sends, built in one place: jobs and the coordinator core decide what to say
// (a status, a set's members, an Execute's responses) and these builders put it into the frame
// the rank's coordinator link reads (client/control/coordinator_link.cc, the other end), encoded:
// the envelope (magic, version, epoch) is stamped here (proto/protocol.h).
//
// A frame is encoded once however many ranks get it: the builders return a Payload, which every
// recipient's Outgoing shares (an Execute to 4,096 members is one encoding, not 4,096). Payloads
// are immutable once built; they live on the event loop's thread (the service copies each into
// the ZeroMQ message it sends).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::server {

// An encoded wire::Frame.
using Payload = std::shared_ptr<const std::string>;

struct Outgoing {
  Outgoing(std::string to, Payload encoded, std::string own_part = {})
      : peer(std::move(to)), frame(std::move(encoded)), own(std::move(own_part)) {}
  std::string peer;  // ZeroMQ routing id
  Payload frame;
  // Further fields of the same Frame for this recipient alone, sent right after `frame` in the
  // same message: a parser merges a message field that occurs twice (protobuf's encoding rule),
  // so a frame shared by many ranks but for a few fields (a Welcome's placement) is encoded once.
  // Usually empty.
  std::string own;
};
using Outbox = std::vector<Outgoing>;

}  // namespace tutti::server

namespace tutti::server::frames {

using server::Payload;

// What a recipient of `out` parses: for tests and fuzzers.
wire::Frame Decode(const Outgoing& out);

// A registration refused (set 0, no tensor), or one announced tensor refused.
Payload Refusal(const Status& status, int32_t set_id = 0, const std::string& tensor = "");
// The answer to a SetAdd or SetRemove: the set's id and members, or the error.
Payload SetReply(uint64_t request_id, int32_t set_id, const Status& status,
                 const std::vector<int32_t>& members);
// The answer to a Join: the rank that joined last, or the error.
Payload JoinReply(uint64_t request_id, int32_t set_id, const Status& status, int32_t last_rank);
// Ranks declared lost, with the status their sets fail with; none lost: tuttid itself goes away.
Payload Fault(const std::vector<int32_t>& lost_ranks, const Status& status);
// Process sets broken with no rank lost (a member lost its data-plane connection to a rank that
// still answers tuttid; or a rank left a set that was on its members' fast path).
Payload SetsBroken(const std::vector<int32_t>& set_ids, const Status& status,
                       bool orderly = false);
// Is the rank's I/O thread alive? It echoes the frame.
Payload Probe(uint64_t nonce);
// The Reformed frames of one re-formation, as Welcomes: shared part once, placements apart.
class Reformeds {
 public:
  explicit Reformeds(const wire::Reformed& shared);
  Outgoing To(const std::string& peer, const wire::Reformed& own) const;

 private:
  Payload shared_;
};
// `count` ranks wait to join the elastic job (0: none any longer).
Payload RanksWaiting(int32_t count);
// The Welcomes of one rendezvous: what every rank is told alike (peers, sets, the job's settings:
// O(ranks) bytes) is encoded once, and each rank's placement is its Outgoing's `own` part.
class Welcomes {
 public:
  explicit Welcomes(const wire::Welcome& shared);
  // The Welcome of `peer`, whose own fields (its placement) are `own`.
  Outgoing To(const std::string& peer, const wire::Welcome& own) const;

 private:
  Payload shared_;
};
Payload Execute(wire::Execute execute);
// A set's NCCL unique id, relayed unchanged from its first member.
Payload CommId(const wire::CommId& relayed);
// The answer to a CountersQuery.
Payload Counters(uint64_t request_id, wire::CoordinatorCounters counters);
// The echo of a rank's heartbeat.
Payload Heartbeat();

// High availability (docs/high-availability.md). Every frame built after SetTerm carries `term`.
void SetTerm(uint64_t term);
uint64_t Term();
// A standby's answer to any frame: `leader` leads (empty: none yet) with `term`.
Payload Redirect(const std::string& leader, uint64_t term);
// A resumed job runs again under this leader (sent after the catch-up Executes).
Payload Resumed();

}  // namespace tutti::server::frames
