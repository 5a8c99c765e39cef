#include "server/service/status_page.h"

#include <ctime>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tutti::server {
namespace {

using nlohmann::json;

std::string Seconds(double s) { return FormatSeconds(s); }

std::string Clock(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

}  // namespace

void RenderJobSection(const json& job, std::string* html) {
  const std::string id = job.at("id").get<std::string>();
  const std::string state = job.at("state").get<std::string>();
  *html += fmt::format("<section class=\"job\" data-job=\"{}\">\n", HtmlEscape(id));
  *html += fmt::format(
      "<h2>job <a class=\"job-id\" href=\"{}\">{}</a>: <span class=\"state-{}\">{}</span>, "
      "{} of {} ranks registered, {} collectives released</h2>\n",
      JobPath(id), HtmlEscape(id), state, state, job.at("registered").get<int>(),
      job.at("size").get<int>(), job.at("collectives_released").get<uint64_t>());

  // Ranks, and the hosts they run on.
  *html += "<h3>Ranks</h3>\n<table class=\"ranks\"><tr><th>rank</th><th>host</th><th>state</th>"
           "<th>data endpoint</th><th>last heard</th></tr>\n";
  std::map<std::string, std::vector<int>> hosts;
  for (const json& rank : job.at("ranks")) {
    const int r = rank.at("rank").get<int>();
    const std::string rank_state = rank.at("state").get<std::string>();
    const std::string host = rank.value("host", "");
    if (!host.empty()) hosts[host].push_back(r);
    *html += fmt::format(
        "<tr data-rank=\"{}\"><td>{}</td><td>{}</td><td class=\"state-{}\">{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        r, r, HtmlEscape(host), rank_state, rank_state, HtmlEscape(rank.value("data_endpoint", "")),
        rank.contains("last_seen_seconds")
            ? Seconds(rank.at("last_seen_seconds").get<double>()) + " ago"
            : "");
  }
  *html += "</table>\n<h3>Hosts</h3>\n<table class=\"hosts\"><tr><th>host</th><th>ranks</th></tr>\n";
  for (const auto& [host, ranks] : hosts)
    *html += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", HtmlEscape(host),
                         RankList(json(ranks)));
  *html += "</table>\n";

  // Process sets and what their negotiations wait for.
  *html += "<h3>Process sets</h3>\n<table class=\"sets\"><tr><th>set</th><th>members</th>"
           "<th>pending tensors</th></tr>\n";
  for (const json& set : job.at("process_sets")) {
    const int set_id = set.at("id").get<int>();
    *html += fmt::format(
        "<tr data-set=\"{}\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td></tr>\n", set_id,
        SetPath(id, set_id), set_id, RankList(set.at("members")),
        set.at("pending_count").get<uint64_t>());
  }
  *html += "</table>\n";
  bool any_pending = false;
  for (const json& set : job.at("process_sets")) {
    if (set.at("pending").empty()) continue;
    if (!any_pending)
      *html += "<h3>Pending tensors</h3>\n<table class=\"pending\"><tr><th>set</th><th>tensor</th>"
               "<th>waiting</th><th>submitted by</th><th>missing ranks</th></tr>\n";
    any_pending = true;
    for (const json& p : set.at("pending"))
      *html += fmt::format(
          "<tr><td>{}</td><td class=\"tensor\">{}</td><td>{}</td><td>{}</td>"
          "<td class=\"missing\">{}</td></tr>\n",
          set.at("id").get<int>(), HtmlEscape(p.at("name").get<std::string>()),
          Seconds(p.at("waited_seconds").get<double>()), RankList(p.at("submitted")),
          RankList(p.at("missing")));
  }
  if (any_pending) *html += "</table>\n";
  *html += "</section>\n";
}

std::string RenderStatusPage(const json& snapshot) {
  const json& jobs = snapshot.at("jobs");
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"5\"><title>tuttid: {} jobs</title>"
      "<style>{}</style></head>\n<body>\n<h1>tuttid</h1>\n"
      "<p>coordinator epoch {} &middot; <span id=\"job-count\">{}</span> jobs &middot; "
      "<a href=\"/status.json\">JSON</a> &middot; <a href=\"/metrics\">Prometheus metrics</a></p>\n",
      jobs.size(), PageStyle(), HtmlEscape(snapshot.value("epoch", "")), jobs.size());
  for (const json& job : jobs) RenderJobSection(job, &html);
  html += "<h2>Recent errors</h2>\n<table class=\"errors\"><tr><th>time</th><th>job</th>"
          "<th>rank</th><th>status</th><th>message</th></tr>\n";
  const json& errors = snapshot.at("recent_errors");
  for (auto it = errors.rbegin(); it != errors.rend(); ++it) {  // newest first
    const int rank = it->at("rank").get<int>();
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        Clock(it->at("time").get<double>()),
                        HtmlEscape(it->at("job").get<std::string>()),
                        rank < 0 ? "" : std::to_string(rank),
                        HtmlEscape(it->at("status").get<std::string>()),
                        HtmlEscape(it->at("message").get<std::string>()));
  }
  html += "</table>\n";
  html += kPageEnd;
  return html;
}

}  // namespace tutti::server
