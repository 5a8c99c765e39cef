// Who may read tuttid's HTTP endpoints (/status, /status.json, /metrics, the job and set pages):
// a bearer token, or HTTP basic credentials, from tuttid's configuration (docs/security.md,
// "The status endpoints"). /healthz stays open. Pure and thread-safe (read-only after
// construction): the status server's worker threads call Allows() on every request.
#pragma once

#include <string>

namespace tutti::server {

struct HttpCredentials {
  std::string token;               // "Authorization: Bearer <token>"; empty: not accepted
  std::string user, password;      // "Authorization: Basic base64(user:password)"; empty user: not
  bool any() const { return !token.empty() || !user.empty(); }
};

class HttpAuth {
 public:
  explicit HttpAuth(HttpCredentials credentials);

  // Whether a request with this Authorization header value ("" when absent) may read the
  // protected endpoints. Always true when no credentials are configured. Compares in time that
  // depends on the lengths only.
  bool Allows(const std::string& authorization) const;

  bool required() const { return required_; }

 private:
  bool required_;
  std::string bearer_, basic_;  // the whole expected header values
};

}  // namespace tutti::server
