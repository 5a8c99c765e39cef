#include "server/service/status_html.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tutti::server {
namespace {

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.3em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; }
.state-alive, .state-running { color: #17692d; }
.state-lost, .state-failed, .missing { color: #b00020; }
section.job { border-top: 2px solid #ddd; margin-top: 1em; }
p.note { color: #555; font-size: 0.9em; }
)";

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string UrlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

bool UrlUnescape(const std::string& text, std::string* out) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      *out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return false;
    const int high = hex(text[i + 1]), low = hex(text[i + 2]);
    if (high < 0 || low < 0) return false;
    *out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return true;
}

std::string JobPath(const std::string& job) { return "/job/" + UrlEscape(job); }

std::string SetPath(const std::string& job, int64_t set_id) {
  return JobPath(job) + "/set/" + std::to_string(set_id);
}

std::string FormatSeconds(double s, bool fine) {
  if (fine && s < 1e-3) return fmt::format("{:.0f} µs", s * 1e6);
  if (fine && s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  return s < 10 ? fmt::format("{:.3f} s", s) : fmt::format("{:.0f} s", s);
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

std::string FormatPercent(double ratio) { return fmt::format("{:.1f} %", ratio * 100); }

std::string RankList(const nlohmann::json& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + ranks[i].dump();
  return text + "]";
}

std::string PageStart(const std::string& title, const std::string& json_path) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"5\"><title>{}</title><style>{}</style></head>\n"
      "<body>\n<p class=\"nav\"><a href=\"/status\">tuttid</a> &middot; "
      "<a href=\"{}\">JSON</a> &middot; <a href=\"/metrics\">Prometheus metrics</a></p>\n",
      HtmlEscape(title), kStyle, HtmlEscape(json_path));
}

std::string PageStyle() { return kStyle; }

}  // namespace tutti::server
