// The way back from the coordinator link to the runtime: what tuttid told this rank, already
// decoded. One interface with named methods rather than loose callbacks, so every path from the
// wire into the runtime can be read and grepped from here.
//
// Threads: every method runs on the link's I/O thread and must not block (no waits, no I/O);
// taking short bookkeeping locks is fine. The listener must outlive the link.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::client {

class LinkListener {
 public:
  // A set's next collectives, in the order every member runs them; cache references are already
  // resolved to tensor names.
  virtual void OnExecute(wire::Execute& execute) = 0;
  // tuttid refused one announced tensor before it reached any collective.
  virtual void OnTensorRefused(int32_t set_id, const std::string& name, const Status& why) = 0;
  // tuttid declared `lost_ranks` lost: every set containing one fails with `status`.
  virtual void OnRanksLost(const std::vector<int32_t>& lost_ranks, const Status& status) = 0;
  // Sets broken with no rank lost (a member lost its data-plane connection to a rank that still
  // answers tuttid): their pending and later requests fail with `status`.
  // `orderly`: a member left in order while the sets were on their fast path: what already runs
  // finishes, what waits fails.
  virtual void OnSetsBroken(const std::vector<int32_t>& set_ids, const Status& status,
                            bool orderly) = 0;
  // An elastic job re-formed into a new membership epoch (docs/elastic.md).
  virtual void OnReformed(const wire::Reformed& reformed) = 0;
  // `count` ranks wait to join the elastic job at its next boundary (0: none any longer).
  virtual void OnRanksWaiting(int32_t count) = 0;
  // The NCCL unique id of (set, device group), relayed from the set's first member.
  virtual void OnCommId(int32_t set_id, int32_t device_group, const std::string& id) = 0;
  // HA groups (docs/high-availability.md): the link lost its coordinator and looks for the
  // group's leader (`resumed` false), or the job runs again under it (true). For the log only:
  // requests simply wait meanwhile.
  virtual void OnFailover(bool resumed, const std::string& what) = 0;
  // Something the operator should read in the rank's log; nothing fails (a tuttid that did not
  // take up an autotuning ask, say).
  virtual void OnWarning(const std::string& what) = 0;
  // The link is dead for good (coordinator lost or stopping, this rank evicted, tuttid restarted,
  // a refused handshake): everything pending and everything later fails with `status`.
  virtual void OnLinkDead(const Status& status) = 0;

 protected:
  ~LinkListener() = default;
};

}  // namespace tutti::client
