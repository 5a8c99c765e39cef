// The status pages: tuttid's snapshot (CoordinatorCore::Describe's JSON) as self-contained HTML,
// rendered on the server so that they read the same in a browser, in curl and in a test
// (docs/operations.md, "Status page and metrics"). Pure functions of the snapshot; the status
// server calls them on its HTTP threads with a snapshot the loop published.
//   status_page.cc      the overview (/status): every job, linking to the pages below
//   status_job_page.cc  one job (/job/<id>): the overview's section and its sets' figures
//   status_set_page.cc  one set (/job/<id>/set/<set>): members, figures, who is slow
// What user-controlled text they show (job ids, hosts, tensor names, error messages) is escaped.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "server/service/status_html.h"

namespace tutti::server {

std::string RenderStatusPage(const nlohmann::json& snapshot);
// `job`: one entry of the snapshot's "jobs".
std::string RenderJobPage(const nlohmann::json& job);
// `set_view`: SetView (status_views.h) of one of the job's sets.
std::string RenderSetPage(const nlohmann::json& set_view);

// A job's section of the overview (ranks, hosts, sets, pending tensors), which its page shows too.
void RenderJobSection(const nlohmann::json& job, std::string* html);

}  // namespace tutti::server
