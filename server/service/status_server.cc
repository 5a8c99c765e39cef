#include "server/service/status_server.h"

#include <httplib.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "server/core/service_metrics.h"
#include "server/service/status_board.h"
#include "server/service/status_page.h"

namespace tutti::server {
namespace {

// How long a request waits for the loop's snapshot before answering with the previous one.
constexpr auto kSnapshotWait = std::chrono::milliseconds(2000);

}  // namespace

StatusServer::StatusServer(const std::string& address, StatusBoard* board,
                           const ServiceMetrics* metrics)
    : server_(std::make_unique<httplib::Server>()) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("--http must be host:port, got '" + address + "'");
  const std::string host = address.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("--http must be host:port, got '" + address + "'");
  }
  // Two threads are plenty for operators and a scraper, and bound what a flood of requests costs.
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_payload_max_length(4096);  // only GETs are served
  server_->Get("/metrics", [board, metrics](const httplib::Request&, httplib::Response& res) {
    board->Request(kSnapshotWait);  // the loop refreshes the gauges on the way
    res.set_content(metrics->Expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/status.json", [board](const httplib::Request&, httplib::Response& res) {
    res.set_content(board->Request(kSnapshotWait), "application/json");
  });
  auto page = [board](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderStatusPage(nlohmann::json::parse(board->Request(kSnapshotWait))),
                    "text/html; charset=utf-8");
  };
  server_->Get("/", page);
  server_->Get("/status", page);
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  if (port == 0) port = server_->bind_to_any_port(host);
  else if (!server_->bind_to_port(host, port)) port = -1;
  if (port <= 0) throw std::runtime_error("cannot bind the status page to " + address);
  url_ = "http://" + host + ":" + std::to_string(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

StatusServer::~StatusServer() {
  server_->stop();
  thread_.join();
}

}  // namespace tutti::server
