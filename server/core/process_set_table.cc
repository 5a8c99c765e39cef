#include "server/core/process_set_table.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tutti::server {

std::string FormatRanks(const std::vector<int32_t>& ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

ProcessSetTable::ProcessSetTable(int32_t world_size) : world_size_(world_size) {
  std::vector<int32_t> world(world_size);
  for (int32_t r = 0; r < world_size; ++r) world[r] = r;
  by_ranks_[world] = 0;
  live_[0] = Entry{std::move(world), State::kActive, {}};
}

Status ProcessSetTable::Normalize(int32_t world_size, std::vector<int32_t>* ranks) {
  if (ranks->empty()) return Status(Code::kInvalidArgument, "a process set needs at least one rank");
  std::sort(ranks->begin(), ranks->end());
  std::vector<int32_t> outside, repeated;
  for (size_t i = 0; i < ranks->size(); ++i) {
    int32_t r = (*ranks)[i];
    if (r < 0 || r >= world_size) outside.push_back(r);
    if (i > 0 && r == (*ranks)[i - 1] && (repeated.empty() || repeated.back() != r))
      repeated.push_back(r);
  }
  if (!outside.empty())
    return Status(Code::kInvalidArgument,
                  fmt::format("ranks {} are outside the world of {} ranks", FormatRanks(outside),
                              world_size));
  if (!repeated.empty())
    return Status(Code::kInvalidArgument,
                  fmt::format("ranks {} are listed more than once", FormatRanks(repeated)));
  return Status::Ok();
}

Status ProcessSetTable::DefineStatic(std::vector<std::vector<int32_t>> lists,
                                     std::vector<int32_t>* ids) {
  for (size_t i = 0; i < lists.size(); ++i) {
    Status status = Normalize(world_size_, &lists[i]);
    if (!status.ok())
      return Status(status.code(), fmt::format("static process set {}: {}", i + 1, status.message()));
    auto known = by_ranks_.find(lists[i]);
    if (known != by_ranks_.end())
      return Status(Code::kInvalidArgument,
                    fmt::format("static process set {} repeats the ranks {} of set {}{}", i + 1,
                                FormatRanks(lists[i]), known->second,
                                known->second == 0 ? " (the world)" : ""));
    int32_t id = next_id_++;
    by_ranks_[lists[i]] = id;
    live_[id] = Entry{std::move(lists[i]), State::kActive, {}};
    ids->push_back(id);
  }
  return Status::Ok();
}

std::vector<std::pair<int32_t, std::vector<int32_t>>> ProcessSetTable::Existing() const {
  std::vector<std::pair<int32_t, std::vector<int32_t>>> sets;
  for (const auto& [id, entry] : live_)
    if (entry.state != State::kAdding) sets.emplace_back(id, entry.ranks);
  return sets;
}

void ProcessSetTable::Restore(const std::vector<std::pair<int32_t, std::vector<int32_t>>>& sets,
                              int32_t next_id) {
  for (const auto& [id, ranks] : sets) {
    if (id == 0) continue;
    live_[id] = Entry{ranks, State::kActive, {}};
    by_ranks_[ranks] = id;
  }
  next_id_ = std::max(next_id_, next_id);
}

bool ProcessSetTable::Arrive(Entry* entry, const Waiter& waiter, Events* events, int32_t set_id) {
  for (const Waiter& w : entry->waiters) {
    if (w.rank == waiter.rank) {
      events->replies.push_back({waiter.rank, waiter.request_id,
                                 Status(Code::kInvalidArgument,
                                        fmt::format("rank {} already waits on a change of process "
                                                    "set {}", waiter.rank, set_id)),
                                 set_id, {}});
      return false;
    }
  }
  entry->waiters.push_back(waiter);
  return entry->waiters.size() == entry->ranks.size();
}

void ProcessSetTable::Add(int32_t caller, uint64_t request_id, std::vector<int32_t> ranks,
                          int64_t timeout_ms, Clock::time_point now, Events* events) {
  Status status = Normalize(world_size_, &ranks);
  if (!status.ok()) {
    events->replies.push_back({caller, request_id, status, -1, {}});
    return;
  }
  const bool member = std::binary_search(ranks.begin(), ranks.end(), caller);
  // A set with a lost rank can never be formed, and its members learn why. A non-member learns
  // the id of a set that exists whatever became of its members: its call must not fail because
  // the members were faster, even faster than to leave the job (Horovod scripts add every set on
  // every rank, and a set's members may finish and finalize before a non-member's add arrives).
  if (member || by_ranks_.count(ranks) == 0) {
    for (int32_t r : ranks) {
      auto lost = lost_.find(r);
      if (lost != lost_.end()) {
        events->replies.push_back({caller, request_id, lost->second, -1, {}});
        return;
      }
    }
  }
  auto [it, fresh] = by_ranks_.try_emplace(ranks, next_id_);
  const int32_t id = it->second;
  if (fresh) live_[next_id_++] = Entry{ranks, State::kAdding, {}};
  Entry& entry = live_.at(id);

  if (!member || entry.state != State::kAdding) {
    events->replies.push_back({caller, request_id, Status::Ok(), id, ranks});
    return;
  }
  Waiter waiter{caller, request_id, timeout_ms, now + std::chrono::milliseconds(timeout_ms)};
  if (!Arrive(&entry, waiter, events, id)) return;
  for (const Waiter& w : entry.waiters)
    events->replies.push_back({w.rank, w.request_id, Status::Ok(), id, entry.ranks});
  entry.waiters.clear();
  entry.state = State::kActive;
  events->activated.push_back(id);
}

void ProcessSetTable::Remove(int32_t caller, uint64_t request_id, int32_t set_id,
                             int64_t timeout_ms, Clock::time_point now, Events* events) {
  auto fail = [&](Code code, std::string message) {
    events->replies.push_back({caller, request_id, Status(code, std::move(message)), set_id, {}});
  };
  if (set_id == 0) return fail(Code::kInvalidArgument, "the world process set (0) cannot be removed");
  auto it = live_.find(set_id);
  const std::vector<int32_t>* ranks = nullptr;
  if (it == live_.end()) {
    Status status = Members(set_id, &ranks);  // says why it is not there
    return fail(status.code(), status.message());
  }
  Entry& entry = it->second;
  // A non-member never waits, whatever state the set is in: its removal asks nothing of it.
  if (!std::binary_search(entry.ranks.begin(), entry.ranks.end(), caller)) {
    events->replies.push_back({caller, request_id, Status::Ok(), set_id, entry.ranks});
    return;
  }
  Status status = Members(set_id, &ranks);
  if (!status.ok()) return fail(status.code(), status.message());
  entry.state = State::kRemoving;
  Waiter waiter{caller, request_id, timeout_ms, now + std::chrono::milliseconds(timeout_ms)};
  if (!Arrive(&entry, waiter, events, set_id)) return;
  for (const Waiter& w : entry.waiters)
    events->replies.push_back({w.rank, w.request_id, Status::Ok(), set_id, entry.ranks});
  by_ranks_.erase(entry.ranks);
  live_.erase(set_id);
  events->removed.push_back(set_id);
}

void ProcessSetTable::Expire(Clock::time_point now, Events* events) {
  for (auto& [id, entry] : live_) {
    auto expired = [&](const Waiter& w) { return w.deadline <= now; };
    if (std::none_of(entry.waiters.begin(), entry.waiters.end(), expired)) continue;
    std::vector<int32_t> missing;
    for (int32_t r : entry.ranks) {
      bool arrived = std::any_of(entry.waiters.begin(), entry.waiters.end(),
                                 [r](const Waiter& w) { return w.rank == r; });
      if (!arrived) missing.push_back(r);
    }
    const char* what = entry.state == State::kAdding ? "add" : "remove";
    for (const Waiter& w : entry.waiters) {
      if (!expired(w)) continue;
      events->replies.push_back(
          {w.rank, w.request_id,
           Status(Code::kTimeout, fmt::format("process set {} {} of {} timed out after {} ms: "
                                              "ranks {} never arrived",
                                              id, what, FormatRanks(entry.ranks), w.timeout_ms,
                                              FormatRanks(missing))),
           id, {}});
    }
    entry.waiters.erase(std::remove_if(entry.waiters.begin(), entry.waiters.end(), expired),
                        entry.waiters.end());
    if (entry.state == State::kRemoving && entry.waiters.empty()) entry.state = State::kActive;
  }
}

void ProcessSetTable::MarkLost(int32_t rank, const Status& status, Events* events) {
  lost_.emplace(rank, status);
  for (auto& [id, entry] : live_) {
    if (!std::binary_search(entry.ranks.begin(), entry.ranks.end(), rank)) continue;
    for (const Waiter& w : entry.waiters)
      if (w.rank != rank) events->replies.push_back({w.rank, w.request_id, status, id, {}});
    entry.waiters.clear();
    if (entry.state == State::kRemoving) entry.state = State::kActive;
  }
}

void ProcessSetTable::Reform(int32_t rank, const Status& status, Events* events) {
  lost_.emplace(rank, status);
  for (auto it = live_.begin(); it != live_.end();) {
    const int32_t id = it->first;
    Entry& entry = it->second;
    for (const Waiter& w : entry.waiters)
      if (w.rank != rank) events->replies.push_back({w.rank, w.request_id, status, id, {}});
    entry.waiters.clear();
    if (entry.state == State::kRemoving) entry.state = State::kActive;
    auto at = std::lower_bound(entry.ranks.begin(), entry.ranks.end(), rank);
    if (at == entry.ranks.end() || *at != rank) {
      ++it;
      continue;
    }
    auto known = by_ranks_.find(entry.ranks);
    if (known != by_ranks_.end() && known->second == id) by_ranks_.erase(known);
    entry.ranks.erase(at);
    if (entry.ranks.empty() || entry.state == State::kAdding) {
      if (entry.state == State::kActive) events->removed.push_back(id);
      it = live_.erase(it);
      continue;
    }
    auto [same, fresh] = by_ranks_.try_emplace(entry.ranks, id);
    if (!fresh && id < same->second) same->second = id;
    ++it;
  }
}

void ProcessSetTable::Grow(const std::vector<int32_t>& added, const Status& status,
                           Events* events) {
  for (auto& [id, entry] : live_) {
    for (const Waiter& w : entry.waiters)
      events->replies.push_back({w.rank, w.request_id, status, id, {}});
    entry.waiters.clear();
    if (entry.state == State::kRemoving) entry.state = State::kActive;
  }
  Entry& world = live_.at(0);
  auto known = by_ranks_.find(world.ranks);
  if (known != by_ranks_.end() && known->second == 0) by_ranks_.erase(known);
  world.ranks.insert(world.ranks.end(), added.begin(), added.end());
  by_ranks_[world.ranks] = 0;
  if (!added.empty()) world_size_ = std::max(world_size_, added.back() + 1);
}

std::optional<Clock::time_point> ProcessSetTable::NextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, entry] : live_)
    for (const Waiter& w : entry.waiters)
      if (!next || w.deadline < *next) next = w.deadline;
  return next;
}

Status ProcessSetTable::Members(int32_t set_id, const std::vector<int32_t>** ranks) const {
  auto it = live_.find(set_id);
  if (it == live_.end()) {
    if (set_id > 0 && set_id < next_id_)
      return Status(Code::kUnknownSet, fmt::format("process set {} was removed", set_id));
    return Status(Code::kUnknownSet, fmt::format("process set {} does not exist", set_id));
  }
  if (it->second.state == State::kAdding)
    return Status(Code::kUnknownSet,
                  fmt::format("process set {} is still being added: not every member called add",
                              set_id));
  *ranks = &it->second.ranks;
  return Status::Ok();
}

}  // namespace tutti::server
