// StatusServer: tuttid's HTTP endpoint (cpp-httplib) for operators and Prometheus:
//   /metrics      Prometheus text format
//   /status       the status page (HTML)
//   /status.json  the same as JSON; ?job=<id> that job's, ?job=<id>&set=<set> that set's
//   /job/<id>, /job/<id>/set/<set>  a page per job and per process set (404 if unknown)
//   /healthz      "ok" (the HTTP side is up; systemd's watchdog watches the loop)
// With credentials configured, every endpoint but /healthz answers 401 (with a Basic challenge,
// so that a browser asks) unless the request carries them (server/security/http_auth.h).
// Thread model: httplib's two worker threads serve requests; each asks the coordinator's loop
// for a snapshot through the StatusBoard and never touches coordinator state itself.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "server/security/http_auth.h"

namespace httplib {
class Server;
}

namespace tutti::server {

class ServiceMetrics;
class StatusBoard;

class StatusServer {
 public:
  // Binds `address` ("host:port"; port 0 lets the OS choose); throws std::runtime_error naming it
  // if that fails. Serves from a thread of its own until destroyed.
  StatusServer(const std::string& address, StatusBoard* board, const ServiceMetrics* metrics,
               HttpCredentials credentials = {});
  ~StatusServer();

  // "http://host:port" with the bound port.
  const std::string& url() const { return url_; }

 private:
  const HttpAuth auth_;
  std::unique_ptr<httplib::Server> server_;
  std::string url_;
  std::thread thread_;
};

}  // namespace tutti::server
