#include "client/set_registry.h"

#include <algorithm>
#include <string>

namespace tutti::client {

void SetRegistry::Insert(int32_t set_id, std::vector<int32_t> sorted_ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = sets_[set_id];
  entry.ranks = std::move(sorted_ranks);
  entry.removed = false;
}

void SetRegistry::ResetAutoNames(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  sets_[set_id].auto_names = 0;
}

void SetRegistry::SetSelf(int32_t self) {
  std::lock_guard<std::mutex> lock(mu_);
  self_ = self;
}

void SetRegistry::MarkRemoved(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  sets_[set_id].removed = true;
}

Status SetRegistry::Find(int32_t set_id, const Entry** entry) const {
  auto it = sets_.find(set_id);
  if (it == sets_.end())
    return Status(Code::kUnknownSet, "process set " + std::to_string(set_id) +
                                         " is unknown to rank " + std::to_string(self_) +
                                         " (add it on this rank first)");
  if (it->second.removed)
    return Status(Code::kUnknownSet, "process set " + std::to_string(set_id) + " was removed");
  *entry = &it->second;
  return Status::Ok();
}

Status SetRegistry::Ranks(int32_t set_id, std::vector<int32_t>* ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* entry = nullptr;
  TUTTI_RETURN_IF_ERROR(Find(set_id, &entry));
  *ranks = entry->ranks;
  return Status::Ok();
}

Status SetRegistry::CheckMember(int32_t set_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* entry = nullptr;
  TUTTI_RETURN_IF_ERROR(Find(set_id, &entry));
  if (!std::binary_search(entry->ranks.begin(), entry->ranks.end(), self_))
    return Status(Code::kNotAMember, "rank " + std::to_string(self_) +
                                         " is not a member of process set " +
                                         std::to_string(set_id));
  return Status::Ok();
}

uint64_t SetRegistry::NextAutoNameIndex(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return sets_[set_id].auto_names++;
}

}  // namespace tutti::client
