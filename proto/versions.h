// Which protocol versions each end of the control plane serves, and the checks both ends make on
// the `version` of the frames they receive (docs/wire-protocol.md, "Versions"). Kept apart from
// protocol.h so that the policy lives in one place for tuttid (message_codec.cc), the ranks
// (client/control/coordinator_link.cc) and the tests.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::wire {

// The oldest protocol of ranks tuttid serves: at least the previous one (N-1), so that an
// operator can upgrade tuttid before the jobs. A protocol-5 rank differs from a protocol-6 one
// only in what it never sends or reads (HA groups), and 6 from 7 only in what ranks exchange
// among themselves (the data-plane handshake) and in fields tuttid reads as "off" when absent,
// so serving 5, 6 and 7 takes no translation.
constexpr uint32_t kOldestProtocolVersion = 5;
static_assert(kOldestProtocolVersion + 2 == kProtocolVersion,
              "tuttid serves N-1 at least: review docs/wire-protocol.md, \"Versions\", and "
              "tests/compat/ when the protocol is bumped");
// The first protocol with HA groups (Frame.term, Redirect, Resume): a rank of an older one cannot
// follow a failover, so an HA group refuses it instead of losing its job later.
constexpr uint32_t kFirstHaProtocolVersion = 6;

// tuttid: may it serve a rank whose frames carry `version`? kVersionMismatch otherwise.
Status CheckRankVersion(uint32_t version);

// A member of an HA group: may it serve a rank of `version`? kVersionMismatch otherwise.
Status CheckHaRankVersion(uint32_t version);

// A rank: may it go on with a tuttid that sent `frame` (whose magic was checked)? It refuses an
// older tuttid (tuttid is upgraded first) and a newer one that says it does not serve this
// rank's protocol, or sent a frame this rank cannot read; a newer tuttid that serves it is fine.
Status CheckCoordinatorVersion(const Frame& frame);

}  // namespace tutti::wire
