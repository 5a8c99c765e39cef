// What the status pages (status_page.cc, status_job_page.cc, status_set_page.cc) share: escaping,
// the links between pages, number formats and the page frame. Pure functions of their arguments;
// any thread.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tutti::server {

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string HtmlEscape(const std::string& text);

// `text` percent-encoded but for RFC 3986's unreserved characters, so that a job id (any bytes a
// rank sent) is one path segment or query value: '/' and '?' included.
std::string UrlEscape(const std::string& text);

// The reverse of UrlEscape (any %XX, other bytes as they are, '+' included); false on a '%' not
// followed by two hex digits.
bool UrlUnescape(const std::string& text, std::string* out);

// The pages' addresses (docs/operations.md): "/job/<id>" and "/job/<id>/set/<set>", the id
// escaped by UrlEscape. HTML-safe as they are (only unreserved characters and '%').
std::string JobPath(const std::string& job);
std::string SetPath(const std::string& job, int64_t set_id);

// "0.004 s", "12 s"; "1.2 ms", "35 µs" below a second with `fine`.
std::string FormatSeconds(double s, bool fine = false);
// "512 B", "1.5 MiB".
std::string FormatBytes(double bytes);
// "37.5 %".
std::string FormatPercent(double ratio);
// "[0, 1, 2]" from a JSON array of ranks.
std::string RankList(const nlohmann::json& ranks);

// "<!DOCTYPE html>...<body>\n": the head (title escaped here), the shared style, and a line of
// links back to the overview and to `json_path` (the page's data, already a safe path).
std::string PageStart(const std::string& title, const std::string& json_path);
constexpr const char* kPageEnd = "</body></html>\n";
// The style sheet every page uses (the overview writes its own head).
std::string PageStyle();

}  // namespace tutti::server
