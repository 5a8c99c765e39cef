// CURVE keys of a tuttid that requires authentication (docs/security.md): its own key pair and,
// per job, the public key of each rank. A client key is bound to the (job, rank) identities it
// is listed under: the ZAP handler admits only listed keys, and a registration is accepted only
// for an identity of the key its connection authenticated with.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tutti::server {

struct JobRank {
  std::string job;
  int32_t rank;
  bool operator==(const JobRank& o) const { return job == o.job && rank == o.rank; }
};

struct CurveServerKeys {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
  // Client public key (Z85) -> the identities it may register as.
  std::unordered_map<std::string, std::vector<JobRank>> clients;
};

// Reads the server's secret key from `secret_file` (TOML: secret_key = "<Z85>") and the client
// list from `clients_file` (TOML: one table per job under [jobs], `ranks = ["<Z85>", ...]` with
// rank r's key at index r). Errors name the file and the key at fault.
Status LoadCurveServerKeys(const std::string& secret_file, const std::string& clients_file,
                           CurveServerKeys* keys);

// True when `key` is 40 characters of Z85 encoding 32 bytes.
bool IsZ85Key(const std::string& key);

// A fresh key pair in the format LoadCurveServerKeys and the ranks' environment expect.
std::string GenerateCurveKeyPairToml();

}  // namespace tutti::server
