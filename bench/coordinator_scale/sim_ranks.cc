#include "coordinator_scale/sim_ranks.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace tutti::bench {

bool Crew::Send(SimRank& rank, const std::string& payload) {
  try {
    if (rank.socket.send(zmq::buffer(payload), zmq::send_flags::none)) return true;
    rank.problem = "send refused";
  } catch (const zmq::error_t& e) {
    rank.problem = std::string("send failed: ") + e.what();
  }
  return false;
}

bool Crew::Await(const std::vector<SimRank*>& who, const OnFrame& on_frame,
                 Clock::time_point deadline) {
  std::vector<SimRank*> pending = who;
  std::vector<zmq::pollitem_t> items;
  bool rebuild = true;
  zmq::message_t message;
  while (!pending.empty()) {
    if (rebuild) {
      items.clear();
      for (SimRank* r : pending) items.push_back({r->socket.handle(), 0, ZMQ_POLLIN, 0});
      rebuild = false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    const int ready = zmq::poll(items.data(), items.size(),
                                std::min(left, std::chrono::milliseconds(200)));
    if (ready <= 0) continue;
    size_t kept = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      SimRank& rank = *pending[i];
      bool done = false;
      if (items[i].revents & ZMQ_POLLIN) {
        while (!done && rank.socket.recv(message, zmq::recv_flags::dontwait)) {
          ++rank.frames;
          done = on_frame(rank, message);
        }
      }
      if (done) {
        rebuild = true;
      } else {
        pending[kept++] = pending[i];
      }
    }
    pending.resize(kept);
  }
  return true;
}

const wire::Frame* Crew::Read(SimRank& rank, const zmq::message_t& message) {
  wire::Frame& frame = scratch_;
  if (!frame.ParseFromArray(message.data(), static_cast<int>(message.size())) ||
      frame.magic() != wire::kMagic) {
    rank.problem = "a frame that is not tutti's";
    return nullptr;
  }
  switch (frame.body_case()) {
    case wire::Frame::kHeartbeat: ++rank.heartbeats; break;
    case wire::Frame::kRefusal:
      rank.problem = "refused: " + frame.refusal().error().message();
      break;
    case wire::Frame::kFault:
      rank.lost.insert(rank.lost.end(), frame.fault().lost_ranks().begin(),
                       frame.fault().lost_ranks().end());
      break;
    case wire::Frame::kExecute: {
      const wire::Execute& execute = frame.execute();
      ++rank.executes;
      uint64_t& due = rank.next_seq[execute.set_id()];
      if (execute.seq() != due && rank.problem.empty())
        rank.problem = "set " + std::to_string(execute.set_id()) + ": Execute seq " +
                       std::to_string(execute.seq()) + " where " + std::to_string(due) +
                       " was due (a frame was lost)";
      due = execute.seq() + 1;
      rank.released += TensorsReleased(execute);
      for (const auto& response : execute.responses()) {
        if (response.has_error() && response.error().code() != 0 && rank.problem.empty())
          rank.problem = "error response: " + response.error().message();
        if (response.cache_slot() != 0 && response.has_spec())
          learned_[rank.job][response.spec().name()] = response.cache_slot() - 1;
        for (const auto& part : response.fused())
          if (part.cache_slot() != 0 && !part.name().empty())
            learned_[rank.job][part.name()] = part.cache_slot() - 1;
      }
      break;
    }
    default: break;
  }
  return &frame;
}

SimRank& Fleet::Add(int job, int32_t rank, const std::string& endpoint) {
  if (ranks_.size() % kSocketsPerContext == 0) {
    contexts_.push_back(std::make_unique<zmq::context_t>(1));
    contexts_.back()->set(zmq::ctxopt::max_sockets, kSocketsPerContext + 16);
  }
  auto sim = std::make_unique<SimRank>();
  sim->job = job;
  sim->rank = rank;
  sim->socket = zmq::socket_t(*contexts_.back(), zmq::socket_type::dealer);
  sim->socket.set(zmq::sockopt::routing_id, RoutingId(job, rank));
  sim->socket.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  sim->socket.set(zmq::sockopt::linger, 0);
  sim->socket.set(zmq::sockopt::heartbeat_ivl, 1000);
  sim->socket.set(zmq::sockopt::heartbeat_timeout, 60000);
  sim->socket.connect(endpoint);
  ranks_.push_back(std::move(sim));
  return *ranks_.back();
}

void Fleet::Vanish(SimRank& rank) { rank.socket.close(); }

std::vector<SimRank*> Fleet::ranks() const {
  std::vector<SimRank*> all;
  for (const auto& r : ranks_) all.push_back(r.get());
  return all;
}

std::vector<Crew> SplitIntoCrews(const std::vector<SimRank*>& ranks, int crews) {
  std::vector<Crew> out;
  const size_t n = ranks.size(), k = static_cast<size_t>(std::max(crews, 1));
  for (size_t c = 0; c < k; ++c)
    out.emplace_back(std::vector<SimRank*>(ranks.begin() + n * c / k, ranks.begin() + n * (c + 1) / k));
  return out;
}

std::vector<Crew> SplitJobsIntoCrews(const std::vector<SimRank*>& ranks, int crews) {
  std::vector<Crew> out;
  const size_t n = ranks.size(), k = static_cast<size_t>(std::max(crews, 1));
  size_t begin = 0;
  for (size_t c = 0; c < k && begin < n; ++c) {
    size_t end = c + 1 == k ? n : std::max(begin, n * (c + 1) / k);
    while (end < n && end > 0 && ranks[end]->job == ranks[end - 1]->job) ++end;  // whole jobs
    out.emplace_back(std::vector<SimRank*>(ranks.begin() + begin, ranks.begin() + end));
    begin = end;
  }
  return out;
}

bool OnEveryCrew(std::vector<Crew>& crews, const std::function<bool(Crew&, size_t)>& work) {
  std::atomic<bool> ok{true};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < crews.size(); ++i)
    threads.emplace_back([&, i] {
      if (!work(crews[i], i)) ok = false;
    });
  for (auto& t : threads) t.join();
  return ok;
}

void Barrier::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t generation = generation_;
  if (++waiting_ == parties_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation; });
}

}  // namespace tutti::bench
