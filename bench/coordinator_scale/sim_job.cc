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
  std::vector<zmq::pollitem_t> items;
  std::vector<bool> in_flight(crew.ranks().size(), false);
  for (size_t i = 0; i < crew.ranks().size(); ++i) {
    SimRank& rank = *crew.ranks()[i];
    rank.released = 0;
    if (!Crew::Send(rank, jobs[rank.job].cached_step)) return false;
    in_flight[i] = true;
    items.push_back({rank.socket.handle(), 0, ZMQ_POLLIN, 0});
  }
  size_t flying = crew.ranks().size();
  zmq::message_t message;
  while (flying > 0 && Clock::now() < deadline) {
    if (zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100)) <= 0) continue;
    const bool stopping = stop.load(std::memory_order_relaxed);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      SimRank& rank = *crew.ranks()[i];
      const int due = static_cast<int>(jobs[rank.job].tensors.size());
      while (rank.socket.recv(message, zmq::recv_flags::dontwait)) {
        ++rank.frames;
        crew.Read(rank, message);
        if (!rank.problem.empty()) return false;
        if (!in_flight[i] || rank.released < due) continue;
        rank.released -= due;
        rank_steps->fetch_add(1, std::memory_order_relaxed);
        if (stopping) {
          in_flight[i] = false;
          --flying;
        } else if (!Crew::Send(rank, jobs[rank.job].cached_step)) {
          return false;
        }
      }
    }
  }
  return flying == 0;
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
