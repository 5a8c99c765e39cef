// The status page: tuttid's snapshot (CoordinatorCore::Describe's JSON) as a self-contained HTML
// page, rendered on the server so that it reads the same in a browser, in curl and in a test.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tutti::server {

std::string RenderStatusPage(const nlohmann::json& snapshot);

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string HtmlEscape(const std::string& text);

}  // namespace tutti::server
