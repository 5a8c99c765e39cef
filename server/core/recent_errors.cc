#include "server/core/recent_errors.h"

#include "server/core/service_metrics.h"

namespace tutti::server {

nlohmann::json RecentErrors::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Entry& e : entries_) {
    const double unix_seconds =
        std::chrono::duration<double>(e.when.time_since_epoch()).count();
    list.push_back({{"time", unix_seconds},
                    {"job", e.job},
                    {"rank", e.rank},
                    {"status", CodeLabel(e.status.code())},
                    {"message", e.status.message()}});
  }
  return list;
}

}  // namespace tutti::server
