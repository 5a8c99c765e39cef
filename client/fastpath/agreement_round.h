// One round of a set's fast path (docs/steady-state.md): every member tells every other which
// cached tensors it has submitted and whether it needs tuttid, and all of them derive the same
// answer: the tensors every member submitted (the AND of their bitmaps) run now, and if any
// member needs tuttid (the OR of their flags) the set leaves the fast path after them.
//
// The exchange is a ring allgather of one small message per member over the set's own
// connections, so it needs no connection beyond a ring collective's, and a member idle on the
// fast path only has to watch its ring predecessor to notice that a round began. Runs on the
// set's lane thread, which owns the context.
#pragma once

#include <cstdint>
#include <vector>

#include "client/fastpath/fast_path_book.h"
#include "common/member_list.h"
#include "common/status.h"
#include "transport/transport.h"

namespace tutti::client {

struct RoundOutcome {
  std::vector<uint32_t> agreed;  // slots every member submitted, ascending
  bool leave = false;            // some member needs tuttid: the set leaves after this round
};

// Round `round` (from 0) of fast-path generation `input.generation`. Every member must run the
// same rounds in the same order; a message of another generation or round means they did not,
// which is kInternal. Errors of the data plane as Context::SendRecv.
Status RunAgreementRound(transport::Context* context, const MemberList& members, int32_t self,
                         uint64_t round, const FastPathInput& input, bool leave,
                         transport::Deadline deadline, std::vector<char>* scratch,
                         RoundOutcome* outcome);

}  // namespace tutti::client
