#include "server/service/status_server.h"

#include <httplib.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "server/core/service_metrics.h"
#include "server/service/status_board.h"
#include "server/service/status_page.h"
#include "server/service/status_views.h"

namespace tutti::server {
namespace {

// How long a request waits for the loop's snapshot before answering with the previous one.
constexpr auto kSnapshotWait = std::chrono::milliseconds(2000);

// An unknown job or set. Plain text that names what was asked for, never sniffed as HTML: the
// job id in it is the requester's.
void NotFound(const std::string& text, httplib::Response& res) {
  res.status = 404;
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(text, "text/plain; charset=utf-8");
}

}  // namespace

StatusServer::StatusServer(const std::string& address, StatusBoard* board,
                           const ServiceMetrics* metrics, HttpCredentials credentials)
    : auth_(std::move(credentials)), server_(std::make_unique<httplib::Server>()) {
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
  // Before any route: everything but /healthz needs the credentials, when there are some.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/healthz" || auth_.Allows(req.get_header_value("Authorization")))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_header("WWW-Authenticate", "Basic realm=\"tuttid\", charset=\"UTF-8\"");
    res.set_content("authentication required: send tuttid's bearer token or basic credentials\n",
                    "text/plain; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  });
  server_->Get("/metrics", [board, metrics](const httplib::Request&, httplib::Response& res) {
    board->Request(kSnapshotWait);  // the loop refreshes the gauges on the way
    res.set_content(metrics->Expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // ?job=<id>: that job's entry; &set=<set>: that set as its page shows it (status_views.h).
  server_->Get("/status.json", [board](const httplib::Request& req, httplib::Response& res) {
    std::string snapshot = board->Request(kSnapshotWait);
    if (!req.has_param("job")) {
      res.set_content(std::move(snapshot), "application/json");
      return;
    }
    std::string not_found;
    const nlohmann::json view = JsonView(nlohmann::json::parse(snapshot),
                                         req.get_param_value("job"), req.get_param_value("set"),
                                         &not_found);
    if (view.is_null()) return NotFound(not_found, res);
    res.set_content(view.dump(), "application/json");
  });
  auto page = [board](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderStatusPage(nlohmann::json::parse(board->Request(kSnapshotWait))),
                    "text/html; charset=utf-8");
  };
  server_->Get("/", page);
  server_->Get("/status", page);
  // A job's page and its sets' pages. Read from the target as sent: httplib's path is already
  // percent-decoded, and a job id (whatever bytes its ranks registered with) may hold "/set/".
  server_->Get(R"(/job/.+)", [board](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json snapshot = nlohmann::json::parse(board->Request(kSnapshotWait));
    const PageTarget target = ResolveJobPath(snapshot, req.target);
    if (!target.job) return NotFound(target.not_found, res);
    res.set_content(target.set ? RenderSetPage(SetView(*target.job, *target.set))
                               : RenderJobPage(*target.job),
                    "text/html; charset=utf-8");
  });
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
