// Fast failure detection (docs/elastic.md, "Detection"): the lease (job_leases.cc) is the backstop
// for frozen ranks; a rank that died is found within tens of milliseconds instead. Two paths, both
// ending in Evict:
//  - a rank whose data-plane connection to a peer closed reports it (PeerReport); tuttid probes
//    that peer and declares it lost if the probe finds no control connection (the service's send
//    fails: ConnectionClosed) or no echo comes within the probe timeout. A peer that echoes is
//    alive: only the reporting set breaks, and nobody is evicted;
//  - any control connection closing (the service's socket monitor) makes tuttid send every live
//    rank a heartbeat: the one whose connection is gone has no route, which the send reports.
// Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tutti::server {

void Job::PeerReport(int32_t rank, const wire::PeerReport& msg, Clock::time_point now,
                     Outbox* out) {
  const int32_t peer = msg.rank();
  // A report about a rank already gone, or a bogus one, asks nothing of tuttid.
  if (peer < 0 || peer >= size_ || peer == rank || !alive(peer)) return;
  // A lane of an incarnation re-formed since saw its connections close because of the
  // re-formation itself: nothing is wrong with the set's current incarnation.
  if (StaleIncarnation(msg.set_id(), msg.incarnation_epoch())) return;
  if (msg.integrity_failure()) {
    IntegrityFailure(rank, peer, msg.set_id(), out);
    return;
  }
  auto [it, fresh] = probes_.try_emplace(peer);
  ProbeWait& probe = it->second;
  probe.reports.push_back({rank, msg.set_id(), msg.incarnation_epoch()});
  if (!fresh) return;  // already probing: its answer settles this report too
  probe.nonce = next_nonce_++;
  probe.deadline = now + std::chrono::milliseconds(policy_.probe_timeout_ms);
  spdlog::info("job '{}': rank {} lost its data-plane connection to rank {}: probing it", id_,
               RankNow(rank), RankNow(peer));
  out->push_back({peer_of_rank_[peer], frames::Probe(probe.nonce)});
}

void Job::IntegrityFailure(int32_t reporter, int32_t peer, int32_t set_id, Outbox* out) {
  // Something on the path between the two altered, replayed, reordered or dropped a record. Both
  // ranks may be fine, but the set's byte streams cannot be trusted any more: the set fails now,
  // on every member, and says why; probing would only find the peer alive.
  auto negotiator = negotiators_.find(set_id);
  if (negotiator == negotiators_.end() || !negotiator->second.contains(reporter) ||
      !negotiator->second.contains(peer))
    return;
  const Status status(
      Code::kAuthFailed,
      fmt::format("data-plane integrity: rank {} received a record from rank {} on process set {} "
                  "that failed authentication (altered, replayed, reordered or dropped on the "
                  "way); the set fails",
                  RankNow(reporter), RankNow(peer), set_id));
  spdlog::error("job '{}': {}", id_, status.message());
  BreakSetAlone(set_id, negotiator->second, status, out);
}

void Job::BreakSetAlone(int32_t set_id, Negotiator& negotiator, const Status& status, Outbox* out) {
  std::vector<wire::Response> failed;
  negotiator.Break(status, &failed);
  if (!failed.empty()) SendExecute(set_id, negotiator, std::move(failed), out);
  const Payload broken = frames::SetsBroken({set_id}, status);
  for (int32_t member : negotiator.members())
    if (alive(member)) out->push_back({peer_of_rank_[member], broken});
}

void Job::ProbeAnswered(int32_t rank, const wire::Probe& msg, Outbox* out) {
  auto it = probes_.find(rank);
  if (it == probes_.end() || it->second.nonce != msg.nonce()) return;
  // The rank is alive: the reporters' sets lost a data-plane connection, not a member. Those sets
  // cannot go on (their members' streams are out of step now), so they alone fail.
  const Status status(Code::kPeerLost,
                      fmt::format("peer lost: data-plane connection to rank {} lost", RankNow(rank)));
  std::vector<int32_t> broken;
  for (const auto& [reporter, set_id, incarnation] : it->second.reports) {
    auto negotiator = negotiators_.find(set_id);
    // Re-formed while the probe was out: the report was about the incarnation before.
    if (StaleIncarnation(set_id, incarnation)) continue;
    if (negotiator == negotiators_.end() || !negotiator->second.contains(reporter) ||
        !negotiator->second.contains(rank) ||
        std::find(broken.begin(), broken.end(), set_id) != broken.end())
      continue;
    broken.push_back(set_id);
    spdlog::warn("job '{}': process set {}: {}; rank {} answers, so only the set fails", id_,
                 set_id, status.message(), RankNow(rank));
    BreakSetAlone(set_id, negotiator->second, status, out);
  }
  probes_.erase(it);
}

void Job::ExpireProbes(Clock::time_point now, Outbox* out) {
  std::vector<std::pair<int32_t, int32_t>> expired;  // (rank, first reporter)
  for (const auto& [rank, probe] : probes_)
    if (probe.deadline <= now) expired.emplace_back(rank, probe.reports.front().reporter);
  for (const auto& [rank, reporter] : expired)
    Evict(rank,
          fmt::format("its data-plane connection to rank {} closed and it did not answer a probe "
                      "within {} ms",
                      RankNow(reporter), policy_.probe_timeout_ms),
          now, out);
}

bool Job::StaleIncarnation(int32_t set_id, uint64_t incarnation_epoch) const {
  if (incarnation_epoch == 0) return false;
  auto changed = set_changed_in_.find(set_id);
  return changed != set_changed_in_.end() && changed->second > incarnation_epoch;
}

void Job::ConnectionClosed(int32_t rank) {
  // Not at once: what the rank sent last (a Bye, when it finalized) may still wait in the socket.
  // The next Tick comes after those frames were read.
  if (welcomed_ && (alive(rank) || joining(rank))) closed_.insert(rank);
}

void Job::EvictClosed(Clock::time_point now, Outbox* out) {
  for (int32_t rank : closed_) {
    if (joining(rank))
      DropJoiner(rank,
                 Status(Code::kPeerLost,
                        fmt::format("peer lost: the rank waiting to join elastic job '{}' in "
                                    "slot {} went away: its control connection to tuttid closed",
                                    id_, rank)),
                 out);
    else
      Evict(rank, "its control connection to tuttid closed", now, out);
  }
  closed_.clear();
}

void Job::CheckConnections(Outbox* out) const {
  if (!welcomed_) return;
  const Payload heartbeat = frames::Heartbeat();
  for (int32_t r = 0; r < size_; ++r)
    if (alive(r) || joining(r)) out->push_back({peer_of_rank_[r], heartbeat});
}

}  // namespace tutti::server
