// What an HA group keeps in etcd about one job (docs/high-availability.md): only what its ranks
// cannot give back to a new leader. The token as a hash (a leader checks resuming ranks against
// it), the world size and membership epoch, and the process-set table with its next id. Written
// when one of them changes (the rendezvous, a set added or removed, a re-formation), never per
// step; erased when the job ends. Pending tensors and the response cache are not here: the
// ranks' re-announcements rebuild them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tutti::server {

struct JobRecord {
  std::string token_sha256;  // hex
  int32_t size = 0;
  uint64_t membership_epoch = 0;
  // False once an elastic job re-formed or grew: its slots and epochs are not resumed (yet).
  bool resumable = true;
  std::vector<std::pair<int32_t, std::vector<int32_t>>> sets;  // world first, by id
  int32_t next_set_id = 1;

  std::string ToJson() const;
  static Status FromJson(const std::string& text, JobRecord* record);
};

// SHA-256 of a job token, in hex.
std::string TokenHash(const std::string& token);

}  // namespace tutti::server
