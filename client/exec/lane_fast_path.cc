// The lane's side of its set's fast path (docs/steady-state.md). While the set is on it, the lane
// is the only thread that decides what the set runs: it starts a round when this rank's
// submissions changed, when it needs tuttid, or when a tensor waited too long; it joins a round
// when its ring predecessor's message arrives; and it runs what a round agreed on before the
// next. Every member's lane does the same rounds in the same order, so the set's collectives
// stay in step without tuttid.
#include <poll.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include "client/exec/lane.h"
#include "client/fastpath/agreement_round.h"
#include "transport/fd_io.h"

namespace tutti::client {
namespace {

// How long a lane that a peer's round woke waits for a submission of its own before answering.
constexpr long kLingerNs = 300 * 1000;

}  // namespace

void Lane::StartFastPath(uint64_t generation) {
  if (port_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (end_fast_path_ || !broken_.ok()) return;
  }
  fast_.generation = generation;  // what a failure below abandons
  // The first generation makes the ring's connections (every member's lane reaches this mark at
  // the same point of the stream), so that an idle lane can wait on its predecessor.
  if (!fast_.connected && members_.size() > 1) {
    char out = 0, in = 0;
    const Status status =
        context_->SendRecv(members_.Next(self_), &out, 1, members_.Previous(self_), &in, 1,
                           transport::Clock::now() + step_timeout_);
    if (!status.ok()) return FastPathFailed(status);
    fast_.connected = true;
  }
  fast_.on = true;
  fast_.rounds = 0;
  fast_.changes_seen = 0;
}

void Lane::FastPathStep() {
  FastPathInput input = port_->Input(set_id_);
  if (input.generation != fast_.generation) {
    fast_.on = false;  // the link dropped the set (removed or re-formed)
    return;
  }
  const auto now = transport::Clock::now();
  const bool overdue = input.oldest && now - *input.oldest >= patience_;
  if (!input.slow && !overdue && input.changes == fast_.changes_seen) {
    // Nothing new here: sleep until a submission, a peer's round, a stop, or the patience of the
    // oldest waiting tensor runs out.
    const auto deadline = input.oldest ? *input.oldest + patience_ : now + std::chrono::hours(24);
    bool incoming = false;
    Status status;
    if (members_.size() > 1) {
      status = context_->AwaitIncoming(members_.Previous(self_), wake_fd_, deadline, &incoming);
    } else {
      pollfd fd{wake_fd_, POLLIN, 0};
      poll(&fd, 1, transport::PollTimeoutMs(deadline));
    }
    DrainWake();
    if (status.code() == Code::kPeerLost) {
      // The predecessor's lane of this incarnation closed while nothing was exchanged: its set
      // ends there (a re-formation, a removal, a finalize), and tuttid's verdict says how. Not
      // reported: the peer may be alive and well in the set's next incarnation.
      fast_.on = false;
      return;
    }
    if (!status.ok()) return FastPathFailed(status);
    Status interrupted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || end_fast_path_) return;
      interrupted = interrupted_;
    }
    if (!interrupted.ok()) return FastPathFailed(interrupted);  // it takes mu_ itself
    if (!incoming) return;  // look again at what this rank has
    input = port_->Input(set_id_);
    if (input.generation != fast_.generation) {
      fast_.on = false;
      return;
    }
    // A peer began a round and this rank has submitted nothing since its last: in a training step
    // its submission is usually microseconds away, and answering at once would only agree on
    // nothing and cost everyone a second round. Wait a moment for it (the peer cannot complete
    // before this rank submits anyway).
    if (input.changes == fast_.changes_seen && !input.slow) {
      pollfd fd{wake_fd_, POLLIN, 0};
      const timespec linger{0, kLingerNs};
      if (ppoll(&fd, 1, &linger, nullptr) > 0) {
        DrainWake();
        input = port_->Input(set_id_);
        if (input.generation != fast_.generation) {
          fast_.on = false;
          return;
        }
      }
    }
  }

  // A tensor that waited past its patience takes the set back to tuttid, whose stall inspector
  // names the members that never submitted it.
  const bool leave = input.slow || (input.oldest && transport::Clock::now() - *input.oldest >= patience_);
  const auto start = Timeline::WallClock::now();
  RoundOutcome outcome;
  const Status status =
      RunAgreementRound(context_.get(), members_, self_, fast_.rounds, input, leave,
                        transport::Clock::now() + step_timeout_, &scratch_, &outcome);
  if (!status.ok()) return FastPathFailed(status);
  ++fast_.rounds;
  fast_.changes_seen = input.changes;
  Counters::Add(counters_->fast_path_rounds, 1);
  Counters::Add(counters_->fast_path_tensors, outcome.agreed.size());
  if (timeline_->on())
    timeline_->Span(set_id_, "FAST_PATH_ROUND", start,
                    {{"round", fast_.rounds - 1},
                     {"tensors", outcome.agreed.size()},
                     {"leave", outcome.leave}});
  std::vector<Work> works;
  if (!outcome.agreed.empty()) works = port_->Take(set_id_, fast_.generation, outcome.agreed);
  if (outcome.leave) {
    // Before running what was agreed: tuttid can negotiate what is left meanwhile.
    port_->Leave(set_id_, fast_.generation, fast_.rounds);
    fast_.on = false;
  }
  for (Work& work : works) RunWork(work);
}

void Lane::FastPathFailed(const Status& status) {
  fast_.on = false;
  Status cause = status;
  if (status.code() == Code::kPeerLost || status.code() == Code::kAuthFailed) {
    const int32_t closed = context_->closed_peer();
    if (closed >= 0 && report_closed_ && !reported_closed_) {
      reported_closed_ = true;
      report_closed_(closed, status.code() == Code::kAuthFailed);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = Status(cause.code(), cause.message() + " (fast-path round on process set " +
                                                         std::to_string(set_id_) + ")");
    cause = broken_;
  }
  if (port_ && fast_.generation != 0) port_->Abandon(set_id_, fast_.generation, cause);
}

}  // namespace tutti::client
