// This rank's requests that were announced to tuttid and not yet answered, by set and name: where
// the I/O thread finds the request a response names.
//
// Not thread-safe: the runtime guards it with its own mutex together with the state that decides
// whether a submission may still enter a set (shut down, coordinator lost, ranks lost), so that a
// failure sweeping a set's requests cannot miss one entering it at the same time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/exec/request.h"
#include "common/status.h"

namespace tutti::client {

class PendingTable {
 public:
  using ByName = std::map<std::string, std::shared_ptr<Request>>;

  // Inserts all of `requests` or none of them: kDuplicateName if one's name is already pending on
  // the set.
  Status InsertAll(int32_t set_id, const std::vector<std::shared_ptr<Request>>& requests) {
    ByName& by_name = sets_[set_id];
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::string& name = requests[i]->name();
      bool repeated = by_name.count(name) > 0;
      for (size_t j = 0; j < i && !repeated; ++j) repeated = requests[j]->name() == name;
      if (repeated)
        return Status(Code::kDuplicateName, "a request named '" + name +
                                                "' is already pending on process set " +
                                                std::to_string(set_id));
    }
    for (const auto& request : requests) by_name.emplace(request->name(), request);
    return Status::Ok();
  }

  // Removes and returns the request pending as (set, name); null if none.
  std::shared_ptr<Request> Take(int32_t set_id, const std::string& name) {
    auto set = sets_.find(set_id);
    if (set == sets_.end()) return nullptr;
    auto it = set->second.find(name);
    if (it == set->second.end()) return nullptr;
    auto request = std::move(it->second);
    set->second.erase(it);
    return request;
  }

  // Removes and returns everything pending on the set.
  ByName TakeSet(int32_t set_id) {
    ByName taken;
    auto it = sets_.find(set_id);
    if (it == sets_.end()) return taken;
    taken.swap(it->second);
    sets_.erase(it);
    return taken;
  }

  // The sets with an entry (possibly emptied by Take).
  std::vector<int32_t> sets() const {
    std::vector<int32_t> ids;
    for (const auto& [id, requests] : sets_) ids.push_back(id);
    return ids;
  }

 private:
  std::map<int32_t, ByName> sets_;
};

}  // namespace tutti::client
