#include "coordinator_scale/sim_job.h"

#include <fmt/format.h>

namespace tutti::bench {

bool RegisterAll(Crew& crew, const std::vector<SimJob>& jobs, Clock::time_point deadline) {
  for (SimRank* rank : crew.ranks())
    if (!Crew::Send(*rank, RegisterFrame(jobs[rank->job].shape, rank->rank))) return false;
  return crew.Await(
      crew.ranks(),
      [&](SimRank& rank, const zmq::message_t& message) {
        WelcomeSummary welcome;
        if (!SummarizeWelcome(message.data(), message.size(), &welcome)) {
          rank.problem = "an unreadable frame instead of a Welcome";
          return true;
        }
        if (!welcome.welcome) {
          crew.Read(rank, message);  // a Refusal names why
          return !rank.problem.empty();
        }
        const int32_t size = jobs[rank.job].shape.size;
        if (welcome.peers != size || welcome.local_size != jobs[rank.job].shape.ranks_per_host ||
            welcome.cross_size != size / jobs[rank.job].shape.ranks_per_host)
          rank.problem = fmt::format("Welcome with {} peers, local size {}, cross size {}",
                                     welcome.peers, welcome.local_size, welcome.cross_size);
        rank.welcome = welcome;
        rank.welcomed = true;
        rank.stamp = Stamp{welcome.coordinator_epoch, welcome.membership_epoch};
        return true;
      },
      deadline);
}

bool Exchange(Crew& crew, const FrameOf& frame_of, const Waits& waits, const Done& done,
              Clock::time_point deadline) {
  std::vector<SimRank*> waiting;
  for (SimRank* rank : crew.ranks()) {
    if (const std::string* frame = frame_of(*rank))
      if (!Crew::Send(*rank, *frame)) return false;
    if (waits(*rank)) waiting.push_back(rank);
  }
  return crew.Await(
      waiting,
      [&](SimRank& rank, const zmq::message_t& message) {
        const wire::Frame* frame = crew.Read(rank, message);
        return !rank.problem.empty() || (frame && done(rank, *frame));
      },
      deadline);
}

bool Step(Crew& crew, const FrameOf& frame_of, const TensorsDue& tensors_due,
          Clock::time_point deadline) {
  for (SimRank* rank : crew.ranks()) rank->released = 0;
  return Exchange(
      crew, frame_of, [&](const SimRank& rank) { return tensors_due(rank) > 0; },
      [&](SimRank& rank, const wire::Frame&) { return rank.released >= tensors_due(rank); },
      deadline);
}

bool Flood(Crew& crew, const std::vector<SimJob>& jobs, const std::atomic<bool>& stop,
           std::atomic<uint64_t>* rank_steps, Clock::time_point deadline) {
  const std::vector<SimRank*>& ranks = crew.ranks();
  // Steps each rank sent and saw released. A job's step completes only once all its ranks sent
  // it, so on `stop` each job goes on to the last step any of its ranks already sent (its ranks
  // are all in this crew: SplitJobsIntoCrews), and stops there.
  std::vector<uint64_t> sent(ranks.size(), 0), done(ranks.size(), 0);
  std::map<int, uint64_t> last_step;  // by job, once stopping
  std::vector<zmq::pollitem_t> items;
  for (size_t i = 0; i < ranks.size(); ++i) {
    ranks[i]->released = 0;
    if (!Crew::Send(*ranks[i], jobs[ranks[i]->job].cached_step)) return false;
    sent[i] = 1;
    items.push_back({ranks[i]->socket.handle(), 0, ZMQ_POLLIN, 0});
  }
  size_t finished = 0;
  zmq::message_t message;
  while (finished < ranks.size() && Clock::now() < deadline) {
    if (last_step.empty() && stop.load(std::memory_order_relaxed))
      for (size_t i = 0; i < ranks.size(); ++i) {
        uint64_t& last = last_step[ranks[i]->job];
        last = std::max(last, sent[i]);
      }
    if (zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100)) <= 0) continue;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      SimRank& rank = *ranks[i];
      const int due = static_cast<int>(jobs[rank.job].tensors.size());
      while (rank.socket.recv(message, zmq::recv_flags::dontwait)) {
        ++rank.frames;
        crew.Read(rank, message);
        if (!rank.problem.empty()) return false;
        if (done[i] == sent[i] || rank.released < due) continue;
        rank.released -= due;
        ++done[i];
        rank_steps->fetch_add(1, std::memory_order_relaxed);
        if (!last_step.empty() && done[i] >= last_step[rank.job]) {
          ++finished;
        } else {
          if (!Crew::Send(rank, jobs[rank.job].cached_step)) return false;
          ++sent[i];
        }
      }
    }
  }
  return finished == ranks.size();
}

bool Spam(Crew& crew, const std::vector<SimJob>& jobs, int window, const std::atomic<bool>& stop,
          std::atomic<uint64_t>* sent, Clock::time_point deadline) {
  const std::vector<SimRank*>& ranks = crew.ranks();
  std::vector<std::string> heartbeat(jobs.size());
  for (const SimJob& job : jobs) {
    wire::Frame frame;
    frame.mutable_heartbeat();
    frame.set_membership_epoch(job.ranks[0]->stamp.membership_epoch);
    heartbeat[job.index] = wire::Encode(frame, job.ranks[0]->stamp.coordinator_epoch);
  }
  // Open-loop: every round, each rank sends up to `window` more as long as its socket takes
  // them (its send queue full means tuttid reads no faster). tuttid answers at most two
  // heartbeats per interval and rank, so a hostile job cannot pace itself on the answers.
  std::vector<zmq::pollitem_t> items;
  for (SimRank* rank : ranks) items.push_back({rank->socket.handle(), 0, ZMQ_POLLIN, 0});
  zmq::message_t message;
  while (Clock::now() < deadline) {
    if (stop.load(std::memory_order_relaxed)) return true;
    for (SimRank* rank : ranks)
      for (int k = 0; k < window; ++k) {
        if (!rank->socket.send(zmq::buffer(heartbeat[rank->job]), zmq::send_flags::dontwait)) break;
        sent->fetch_add(1, std::memory_order_relaxed);
      }
    if (zmq::poll(items.data(), items.size(), std::chrono::milliseconds(1)) <= 0) continue;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      while (ranks[i]->socket.recv(message, zmq::recv_flags::dontwait)) {
        (void)crew.Read(*ranks[i], message);
        if (!ranks[i]->problem.empty()) return false;
      }
    }
  }
  return false;
}

bool CollectSlots(const std::vector<Crew*>& crews, SimJob* job, std::string* problem) {
  const std::unordered_map<std::string, uint32_t>* reference = nullptr;
  for (Crew* crew : crews) {
    auto it = crew->learned_slots().find(job->index);
    if (it == crew->learned_slots().end()) continue;
    if (reference && it->second != *reference) {
      *problem = "crews learned different cache slots";
      return false;
    }
    reference = &it->second;
  }
  if (!reference) {
    *problem = "no rank learned a cache slot";
    return false;
  }
  job->slots.clear();
  for (const auto& spec : job->tensors) {
    auto slot = reference->find(spec.name());
    if (slot == reference->end()) {
      *problem = "no cache slot for '" + spec.name() + "'";
      return false;
    }
    job->slots.push_back(slot->second);
  }
  return true;
}

std::string Problems(const std::vector<SimRank*>& ranks) {
  std::string first;
  int count = 0;
  for (const SimRank* rank : ranks)
    if (!rank->problem.empty()) {
      if (count++ == 0) first = fmt::format("job {} rank {}: {}", rank->job, rank->rank, rank->problem);
    }
  return count == 0 ? "" : fmt::format("{} ranks with problems; first: {}", count, first);
}

}  // namespace tutti::bench
