// The join barrier: ranks that have no more data wait on a set until every member joined, or their
// own timeout passes. The waiters are the job's, not the negotiator's: the negotiator only learns
// who joined, while the replies (and the timeouts that name who never came) go out from here.
// Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <algorithm>

#include <fmt/format.h>


namespace tutti::server {

void Job::ReplyJoin(const JoinWaiter& waiter, int32_t set_id, const Status& status, int32_t last,
                    Outbox* out) {
  if (!alive(waiter.rank)) return;
  out->push_back({peer_of_rank_[waiter.rank], frames::JoinReply(waiter.request_id, set_id, status, last)});
}

void Job::Join(int32_t rank, const wire::Join& msg, Clock::time_point now, Outbox* out) {
  const JoinWaiter waiter{rank, msg.request_id(), msg.timeout_ms(),
                          now + std::chrono::milliseconds(msg.timeout_ms())};
  auto it = negotiators_.find(msg.set_id());
  Status status;
  if (it == negotiators_.end()) {
    const std::vector<int32_t>* unused = nullptr;
    status = sets_.Members(msg.set_id(), &unused);
  } else if (!it->second.contains(rank)) {
    status = Status(Code::kNotAMember, fmt::format("rank {} is not a member of process set {}",
                                                   rank, msg.set_id()));
  }
  if (!status.ok()) return ReplyJoin(waiter, msg.set_id(), status, -1, out);
  joins_[msg.set_id()].push_back(waiter);
  std::vector<wire::Response> ready;
  int32_t last = -1;
  const bool everyone = it->second.Join(rank, &ready, &last);
  if (!ready.empty()) SendExecute(msg.set_id(), it->second, std::move(ready), out);
  if (!everyone) return;
  for (const JoinWaiter& w : joins_[msg.set_id()]) ReplyJoin(w, msg.set_id(), Status::Ok(), last, out);
  joins_.erase(msg.set_id());
}

void Job::ExpireJoins(Clock::time_point now, Outbox* out) {
  for (auto& [set_id, waiters] : joins_) {
    auto negotiator = negotiators_.find(set_id);
    std::vector<JoinWaiter> kept;
    for (const JoinWaiter& w : waiters) {
      if (w.deadline > now) {
        kept.push_back(w);
        continue;
      }
      std::vector<int32_t> missing;
      for (int32_t m : negotiator->second.members()) {
        bool joined = std::any_of(waiters.begin(), waiters.end(),
                                  [m](const JoinWaiter& j) { return j.rank == m; });
        if (!joined) missing.push_back(m);
      }
      negotiator->second.Unjoin(w.rank);
      ReplyJoin(w, set_id,
                Status(Code::kTimeout, fmt::format("join on process set {} timed out after {} ms: "
                                                   "ranks {} never joined",
                                                   set_id, w.timeout_ms, FormatRanks(missing))),
                -1, out);
    }
    waiters.swap(kept);
  }
}

}  // namespace tutti::server
