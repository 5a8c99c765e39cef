// The page of one job (/job/<id>): the overview's section of the job, then a row of figures per
// process set, each linking to the set's own page. The figures are SetStats' (tuttid's view of
// each set since it was added); what ran on the members' fast path is counted in rounds only.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/service/status_page.h"

namespace tutti::server {
namespace {

using nlohmann::json;

void RenderSetRow(const std::string& job_id, const json& set, std::string* html) {
  const int set_id = set.at("id").get<int>();
  const std::string link =
      fmt::format("<a href=\"{}\">set {}</a>", SetPath(job_id, set_id), set_id);
  if (!set.contains("stats")) {
    *html += fmt::format("<tr data-set=\"{}\"><td>{}</td><td class=\"num\">{}</td>"
                         "<td colspan=\"7\"></td></tr>\n",
                         set_id, link, set.at("members").size());
    return;
  }
  const json& stats = set.at("stats");
  const json& latency = stats.at("negotiation_seconds");
  const json& stragglers = stats.at("stragglers").at("ranks");
  std::string worst;
  if (!stragglers.empty()) {
    const json& w = stragglers.front();
    worst = fmt::format("rank {} ({} times, {} mean)", w.at("rank").get<int>(),
                        w.at("last").get<uint64_t>(),
                        FormatSeconds(w.at("lag_mean_seconds").get<double>(), true));
  }
  *html += fmt::format(
      "<tr data-set=\"{}\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
      "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
      "<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
      set_id, link, set.at("members").size(), stats.at("negotiations").get<uint64_t>(),
      FormatBytes(stats.at("bytes").get<double>()),
      FormatPercent(stats.at("cache_hit_rate").get<double>()),
      FormatPercent(stats.at("fusion").at("fusion_rate").get<double>()),
      FormatSeconds(latency.at("mean").get<double>(), true),
      set.at("fast_path").at("grants").get<uint64_t>(), worst);
}

}  // namespace

std::string RenderJobPage(const json& job) {
  const std::string id = job.at("id").get<std::string>();
  std::string html = PageStart("tuttid: job " + id, "/status.json?job=" + UrlEscape(id));
  html += fmt::format("<h1>job <span class=\"job-id\">{}</span></h1>\n", HtmlEscape(id));
  html += "<h2>Process set figures</h2>\n<table class=\"set-figures\"><tr><th>set</th>"
          "<th>members</th><th>negotiations</th><th>bytes</th><th>cache hits</th>"
          "<th>fused</th><th>mean negotiation</th><th>fast-path grants</th>"
          "<th>slowest member</th></tr>\n";
  for (const json& set : job.at("process_sets")) RenderSetRow(id, set, &html);
  html += "</table>\n<p class=\"note\">Since each set was added, as tuttid saw it; a set on its "
          "members' fast path negotiates without tuttid, which counts only how often it went "
          "there.</p>\n";
  RenderJobSection(job, &html);
  html += kPageEnd;
  return html;
}

}  // namespace tutti::server
