// The page of one process set (/job/<id>/set/<set>): its members and their state, its figures
// (SetStats: negotiations and bytes by kind, cache hits, fusion, negotiation latency), the fast
// path, and "who is slow": the members that completed its tensors last most often, and by how
// much. The Prometheus series of the set give the same figures without ranks
// (tutti_set_straggler_seconds); the names are here.
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/service/status_page.h"

namespace tutti::server {
namespace {

using nlohmann::json;

std::string Cell(const std::string& text) { return "<td class=\"num\">" + text + "</td>"; }

void RenderMembers(const json& view, std::string* html) {
  *html += "<h2>Members</h2>\n<table class=\"members\"><tr><th>rank</th><th>host</th>"
           "<th>state</th><th>last heard</th><th>times last</th><th>mean lag</th>"
           "<th>max lag</th></tr>\n";
  for (const json& m : view.at("member_states")) {
    const std::string state = m.at("state").get<std::string>();
    std::string last = Cell("0") + Cell("") + Cell("");
    if (m.contains("straggler")) {
      const json& s = m.at("straggler");
      last = Cell(std::to_string(s.at("last").get<uint64_t>())) +
             Cell(FormatSeconds(s.at("lag_mean_seconds").get<double>(), true)) +
             Cell(FormatSeconds(s.at("lag_max_seconds").get<double>(), true));
    }
    *html += fmt::format(
        "<tr data-rank=\"{}\"><td>{}</td><td>{}</td><td class=\"state-{}\">{}</td><td>{}</td>{}"
        "</tr>\n",
        m.at("rank").get<int>(), m.at("rank").get<int>(), HtmlEscape(m.value("host", "")),
        HtmlEscape(state), HtmlEscape(state),
        m.contains("last_seen_seconds")
            ? FormatSeconds(m.at("last_seen_seconds").get<double>()) + " ago"
            : "",
        last);
  }
  *html += "</table>\n";
}

void RenderFigures(const json& view, std::string* html) {
  const json& fast = view.at("fast_path");
  std::string rows;
  auto row = [&rows](const char* what, const std::string& value) {
    rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", what, value);
  };
  if (view.contains("stats")) {
    const json& stats = view.at("stats");
    const json& latency = stats.at("negotiation_seconds");
    const json& fusion = stats.at("fusion");
    row("negotiations", std::to_string(stats.at("negotiations").get<uint64_t>()));
    row("bytes negotiated", FormatBytes(stats.at("bytes").get<double>()));
    row("cache hits", fmt::format("{} ({})", stats.at("cached").get<uint64_t>(),
                                  FormatPercent(stats.at("cache_hit_rate").get<double>())));
    row("negotiation latency",
        fmt::format("mean {}, p50 &le; {}, p99 &le; {}, max {}",
                    FormatSeconds(latency.at("mean").get<double>(), true),
                    FormatSeconds(latency.at("p50").get<double>(), true),
                    FormatSeconds(latency.at("p99").get<double>(), true),
                    FormatSeconds(latency.at("max").get<double>(), true)));
    row("collectives released", std::to_string(fusion.at("collectives").get<uint64_t>()));
    row("tensors fused", fmt::format("{} of {} ({})", fusion.at("fused_tensors").get<uint64_t>(),
                                     fusion.at("tensors").get<uint64_t>(),
                                     FormatPercent(fusion.at("fusion_rate").get<double>())));
  }
  row("fast path", fmt::format("{} of {} members on it now; {} grants, {} exits, {} member "
                               "rounds in exited generations",
                               fast.at("members_on").get<uint64_t>(),
                               view.at("members").size(), fast.at("grants").get<uint64_t>(),
                               fast.at("exits").get<uint64_t>(),
                               fast.at("rounds").get<uint64_t>()));
  if (view.contains("autotune")) {
    // docs/autotune.md: the values in effect, where the search stands, the best throughput.
    const json& tune = view.at("autotune");
    const json& current = tune.at("current");
    std::string pinned;
    for (const json& name : tune.at("pinned")) pinned += (pinned.empty() ? "" : ", ") + name.get<std::string>();
    row("autotune",
        fmt::format("<span class=\"autotune-{0}\">{0}</span> after {1} trials: fusion threshold "
                    "{2}, small allreduces up to {3}, pipeline pieces of {4}; best {5}/s{6}",
                    tune.at("state").get<std::string>(), tune.at("trials").size(),
                    FormatBytes(current.at("fusion_threshold").get<double>()),
                    FormatBytes(current.at("small_allreduce_bytes").get<double>()),
                    FormatBytes(current.at("pipeline_bytes").get<double>()),
                    FormatBytes(tune.at("best_bytes_per_second").get<double>()),
                    pinned.empty() ? "" : "; pinned: " + HtmlEscape(pinned)));
  }
  *html += "<h2>Figures</h2>\n<table class=\"figures\">\n" + rows + "</table>\n";
  *html += "<p class=\"note\">As tuttid saw the set since it was added. Time on the data plane is "
           "each rank's own: <code>tutti.set_counters</code> / "
           "<code>tutti_get_set_counters</code>.</p>\n";
  if (!view.contains("stats")) return;
  *html += "<h3>By collective</h3>\n<table class=\"kinds\"><tr><th>kind</th>"
           "<th>negotiations</th><th>bytes</th></tr>\n";
  for (const auto& [kind, figures] : view.at("stats").at("by_kind").items())
    *html += fmt::format("<tr data-kind=\"{0}\"><td>{0}</td>{1}{2}</tr>\n", HtmlEscape(kind),
                         Cell(std::to_string(figures.at("negotiations").get<uint64_t>())),
                         Cell(FormatBytes(figures.at("bytes").get<double>())));
  *html += "</table>\n";
}

void RenderWhoIsSlow(const json& view, std::string* html) {
  *html += "<h2 id=\"who-is-slow\">Who is slow</h2>\n";
  if (!view.contains("stats")) return;
  const json& stragglers = view.at("stats").at("stragglers");
  std::map<int64_t, std::string> host;
  for (const json& m : view.at("member_states"))
    host[m.at("rank").get<int64_t>()] = m.value("host", "");
  const uint64_t observed = stragglers.at("observed").get<uint64_t>();
  *html += fmt::format(
      "<p>Of <span id=\"straggled\">{}</span> tensors every member announced, the members that "
      "announced last, and how long after the one before them, worst first (members ever last: "
      "{} of {}, the worst {} shown; lag p50 &le; {}, p99 &le; {}).</p>\n",
      observed, stragglers.at("ranks_ever_last").get<uint64_t>(), view.at("members").size(),
      stragglers.at("ranks").size(),
      FormatSeconds(stragglers.at("lag_seconds").at("p50").get<double>(), true),
      FormatSeconds(stragglers.at("lag_seconds").at("p99").get<double>(), true));
  *html += "<table class=\"stragglers\"><tr><th>rank</th><th>host</th><th>times last</th>"
           "<th>share</th><th>total lag</th><th>mean lag</th><th>max lag</th></tr>\n";
  for (const json& s : stragglers.at("ranks")) {
    const int64_t rank = s.at("rank").get<int64_t>();
    *html += fmt::format(
        "<tr data-rank=\"{}\"><td>{}</td><td>{}</td>{}{}{}{}{}</tr>\n", rank, rank,
        HtmlEscape(host[rank]), Cell(std::to_string(s.at("last").get<uint64_t>())),
        Cell(FormatPercent(s.at("share").get<double>())),
        Cell(FormatSeconds(s.at("lag_total_seconds").get<double>(), true)),
        Cell(FormatSeconds(s.at("lag_mean_seconds").get<double>(), true)),
        Cell(FormatSeconds(s.at("lag_max_seconds").get<double>(), true)));
  }
  *html += "</table>\n";
}

void RenderPending(const json& view, std::string* html) {
  *html += fmt::format("<h2>Pending tensors</h2>\n<p>{} waiting for members.</p>\n",
                       view.at("pending_count").get<uint64_t>());
  if (view.at("pending").empty()) return;
  *html += "<table class=\"pending\"><tr><th>tensor</th><th>waiting</th><th>submitted by</th>"
           "<th>missing ranks</th></tr>\n";
  for (const json& p : view.at("pending"))
    *html += fmt::format(
        "<tr><td class=\"tensor\">{}</td><td>{}</td><td>{}</td><td class=\"missing\">{}</td>"
        "</tr>\n",
        HtmlEscape(p.at("name").get<std::string>()),
        FormatSeconds(p.at("waited_seconds").get<double>()), RankList(p.at("submitted")),
        RankList(p.at("missing")));
  *html += "</table>\n";
}

}  // namespace

std::string RenderSetPage(const json& view) {
  const std::string job = view.at("job").at("id").get<std::string>();
  const int set_id = view.at("id").get<int>();
  std::string html = PageStart(fmt::format("tuttid: job {} set {}", job, set_id),
                               fmt::format("/status.json?job={}&set={}", UrlEscape(job), set_id));
  const std::string state = view.at("job").at("state").get<std::string>();
  html += fmt::format(
      "<h1 data-job=\"{0}\" data-set=\"{1}\">job <a class=\"job-id\" href=\"{2}\">{0}</a> "
      "&middot; process set {1}</h1>\n<p>job <span class=\"state-{3}\">{3}</span>; "
      "{4} members: {5}</p>\n",
      HtmlEscape(job), set_id, JobPath(job), HtmlEscape(state), view.at("members").size(),
      RankList(view.at("members")));
  RenderMembers(view, &html);
  RenderWhoIsSlow(view, &html);
  RenderFigures(view, &html);
  RenderPending(view, &html);
  html += kPageEnd;
  return html;
}

}  // namespace tutti::server
