// The per-job and per-set pages' addressing and views (server/service/status_views.h,
// status_html.h): which job and set an address names, 404 texts, escaping of job ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/service/status_page.h"
#include "server/service/status_views.h"

namespace tutti::server {
namespace {

using nlohmann::json;

json Job(const std::string& id, std::vector<int> sets) {
  json process_sets = json::array();
  for (int s : sets)
    process_sets.push_back({{"id", s}, {"members", {0, 1}}, {"pending_count", 0},
                            {"pending", json::array()},
                            {"fast_path", {{"members_on", 0}, {"grants", 0}, {"exits", 0},
                                           {"rounds", 0}}}});
  return {{"id", id}, {"state", "running"}, {"size", 2}, {"registered", 2},
          {"collectives_released", 0},
          {"ranks", {{{"rank", 0}, {"state", "alive"}, {"host", "h<0>"}},
                     {{"rank", 1}, {"state", "lost"}, {"host", "h1"}}}},
          {"process_sets", std::move(process_sets)}};
}

json Snapshot() {
  return {{"epoch", "0"},
          {"jobs", {Job("a", {0, 1}), Job("a/set/1", {0}), Job("<b> & 'c'", {0})}},
          {"recent_errors", json::array()}};
}

TEST(StatusViews, EscapesJobIdsIntoOnePathSegmentAndBack) {
  EXPECT_EQ(UrlEscape("a/set/1 <b>&+%"), "a%2Fset%2F1%20%3Cb%3E%26%2B%25");
  EXPECT_EQ(JobPath("a/b"), "/job/a%2Fb");
  EXPECT_EQ(SetPath("x_y.z-~", 3), "/job/x_y.z-~/set/3");
  std::string out;
  ASSERT_TRUE(UrlUnescape("a%2Fset%2f1+%3C", &out));
  EXPECT_EQ(out, "a/set/1+<");
  EXPECT_FALSE(UrlUnescape("a%2", &out));
  EXPECT_FALSE(UrlUnescape("a%zz", &out));
}

TEST(StatusViews, AJobIdHoldingSetNeverReadsAsAnotherJobsSet) {
  const json snapshot = Snapshot();
  PageTarget t = ResolveJobPath(snapshot, "/job/a/set/1");
  ASSERT_TRUE(t.job && t.set);
  EXPECT_EQ((*t.job)["id"], "a");
  EXPECT_EQ((*t.set)["id"], 1);
  t = ResolveJobPath(snapshot, "/job/a%2Fset%2F1");
  ASSERT_TRUE(t.job);
  EXPECT_EQ((*t.job)["id"], "a/set/1");
  EXPECT_EQ(t.set, nullptr);
  t = ResolveJobPath(snapshot, "/job/a%2Fset%2F1/set/0?refresh=1");
  ASSERT_TRUE(t.job && t.set);
  EXPECT_EQ((*t.job)["id"], "a/set/1");
}

TEST(StatusViews, UnknownJobsSetsAndAddressesSayWhat) {
  const json snapshot = Snapshot();
  EXPECT_EQ(ResolveJobPath(snapshot, "/job/nope").not_found, "no job 'nope' on this tuttid\n");
  EXPECT_EQ(ResolveJobPath(snapshot, "/job/a/set/7").not_found,
            "job 'a' has no active process set 7\n");
  for (const char* bad : {"/job/a/set/", "/job/a/set/x", "/job/a/", "/job/a/sets/1", "/job/%zz",
                          "/job/a/set/99999999999"})
    EXPECT_NE(ResolveJobPath(snapshot, bad).not_found.find("not a page of tuttid"),
              std::string::npos)
        << bad;
  std::string why;
  EXPECT_TRUE(JsonView(snapshot, "zz", "", &why).is_null());
  EXPECT_EQ(why, "no job 'zz' on this tuttid\n");
  EXPECT_TRUE(JsonView(snapshot, "a", "2", &why).is_null());
  EXPECT_EQ(why, "job 'a' has no active process set '2'\n");
  EXPECT_EQ(JsonView(snapshot, "a", "", &why)["id"], "a");
}

TEST(StatusViews, TheSetViewJoinsMembersWithTheirState) {
  const json snapshot = Snapshot();
  json job = Job("j", {0});
  job["process_sets"][0]["stats"] = {
      {"stragglers", {{"ranks", {{{"rank", 1}, {"last", 4}, {"lag_mean_seconds", 0.5}}}}}}};
  const json view = SetView(job, job["process_sets"][0]);
  EXPECT_EQ(view["job"]["id"], "j");
  ASSERT_EQ(view["member_states"].size(), 2u);
  EXPECT_EQ(view["member_states"][0]["state"], "alive");
  EXPECT_FALSE(view["member_states"][0].contains("straggler"));
  EXPECT_EQ(view["member_states"][1]["state"], "lost");
  EXPECT_EQ(view["member_states"][1]["straggler"]["last"], 4);
}

TEST(StatusViews, PagesEscapeWhatRanksSent) {
  const json snapshot = Snapshot();
  const json& job = snapshot["jobs"][2];
  const json view = SetView(job, job["process_sets"][0]);
  for (const std::string& page :
       {RenderStatusPage(snapshot), RenderJobPage(job), RenderSetPage(view)}) {
    EXPECT_EQ(page.find("<b>"), std::string::npos) << page;
    EXPECT_EQ(page.find("<0>"), std::string::npos) << page;
    EXPECT_NE(page.find("&lt;b&gt; &amp; &#39;c&#39;"), std::string::npos) << page;
  }
  EXPECT_NE(RenderSetPage(view).find(
                "href=\"/job/%3Cb%3E%20%26%20%27c%27\""),
            std::string::npos);
}

}  // namespace
}  // namespace tutti::server
