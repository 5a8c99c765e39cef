#include "client/world_map.h"

#include <algorithm>
#include <string>

namespace tutti::client {

WorldMap::WorldMap(int32_t size, uint64_t membership_epoch, Placement placement)
    : slots_(size), membership_epoch_(membership_epoch), placement_(placement) {
  for (int32_t r = 0; r < size; ++r) slots_[r] = r;
}

void WorldMap::Reform(std::vector<int32_t> live_slots, uint64_t membership_epoch,
                      Placement placement) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_ = std::move(live_slots);
  membership_epoch_ = membership_epoch;
  placement_ = placement;
}

int32_t WorldMap::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(slots_.size());
}

uint64_t WorldMap::membership_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return membership_epoch_;
}

WorldMap::Placement WorldMap::placement() const {
  std::lock_guard<std::mutex> lock(mu_);
  return placement_;
}

int32_t WorldMap::RankOf(int32_t slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::lower_bound(slots_.begin(), slots_.end(), slot);
  return it != slots_.end() && *it == slot ? static_cast<int32_t>(it - slots_.begin()) : -1;
}

int32_t WorldMap::SlotOf(int32_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return rank >= 0 && rank < static_cast<int32_t>(slots_.size()) ? slots_[rank] : -1;
}

std::vector<int32_t> WorldMap::ToRanks(const std::vector<int32_t>& slots) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> ranks;
  ranks.reserve(slots.size());
  for (int32_t slot : slots) {
    auto it = std::lower_bound(slots_.begin(), slots_.end(), slot);
    if (it != slots_.end() && *it == slot) ranks.push_back(static_cast<int32_t>(it - slots_.begin()));
  }
  return ranks;
}

Status WorldMap::ToSlots(const std::vector<int32_t>& ranks, std::vector<int32_t>* slots) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int32_t size = static_cast<int32_t>(slots_.size());
  std::vector<int32_t> outside;
  slots->clear();
  for (int32_t r : ranks) {
    if (r < 0 || r >= size) outside.push_back(r);
    else slots->push_back(slots_[r]);
  }
  if (outside.empty()) return Status::Ok();
  std::sort(outside.begin(), outside.end());
  std::string list;
  for (int32_t r : outside) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return Status(Code::kInvalidArgument,
                "ranks [" + list + "] are outside the world of " + std::to_string(size) + " ranks");
}

}  // namespace tutti::client
