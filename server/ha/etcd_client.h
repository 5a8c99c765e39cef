// EtcdClient: the calls an HA group of tuttids makes to etcd (docs/high-availability.md), over
// etcd's v3 JSON gateway (the HTTP face of its gRPC API, served on every etcd client URL since
// 3.3 at /v3/...), with the HTTP and JSON libraries tuttid already uses: a lease with its
// keep-alive, single keys, and the one compare-and-put an election needs.
//
// Blocking; every call waits at most the client's timeout. Not thread-safe: one client per thread
// (an httplib::Client holds one connection). Keys and values are bytes (the gateway carries them
// base64-encoded); revisions and lease ids are etcd's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace tutti::server::ha {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: the key outlives every lease
};

class EtcdClient {
 public:
  // `endpoint`: an etcd client URL, "http://HOST:PORT".
  EtcdClient(const std::string& endpoint, std::chrono::milliseconds timeout);
  ~EtcdClient();

  // A lease of `ttl_s` seconds; keys put with it go when it expires or is revoked.
  Status Grant(int64_t ttl_s, int64_t* lease);
  // Renews `lease`; *ttl_s is what it has left afterwards, 0 if it had expired already (then it
  // stays expired: its keys are gone).
  Status KeepAlive(int64_t lease, int64_t* ttl_s);
  Status Revoke(int64_t lease);

  Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // The key's current value, or nullopt if it does not exist.
  Status Get(const std::string& key, std::optional<KeyValue>* found);
  Status Delete(const std::string& key);
  // Every key that starts with `prefix` (at most a few thousand: one read, no paging).
  Status GetPrefix(const std::string& prefix, std::vector<KeyValue>* found);
  // Puts `value` at `key` with `lease` only if the key does not exist (an election: the first
  // candidate creates it). *created says whether it did; *current is the key as it is after the
  // call (this candidate's value, or the holder's).
  Status CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease,
                        bool* created, KeyValue* current);

  const std::string& endpoint() const { return endpoint_; }

 private:
  // POSTs `body` (JSON) to `path`; the parsed JSON answer in *answer (a string, to keep
  // nlohmann out of this header).
  Status Call(const char* path, const std::string& body, std::string* answer);

  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace tutti::server::ha
