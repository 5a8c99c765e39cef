// Simulated ranks: one ZeroMQ DEALER per rank, as a rank's coordinator link has
// (client/control/coordinator_link.cc), and crews of them whose sockets one thread polls.
//
// Ownership and threads: a Fleet owns every rank's socket and the ZeroMQ context; a Crew is a
// slice of the fleet's ranks that exactly one thread uses at a time (ZeroMQ sockets may move
// between threads across a full barrier, which starting and joining the crew's thread is). A
// Crew's scratch frame and learned slots belong to that thread too. The fleet outlives its crews.
#pragma once

#include <cstdint>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "coordinator_scale/tuttid_process.h"
#include "coordinator_scale/wire_frames.h"

namespace tutti::bench {

struct SimRank {
  int job = 0;  // index of its job in the run
  int32_t rank = 0;
  zmq::socket_t socket;
  Stamp stamp;  // from its Welcome
  bool welcomed = false;
  WelcomeSummary welcome;
  std::map<int32_t, uint64_t> next_seq;  // per set: the Execute seq due next
  int released = 0;  // tensors released to it since the phase reset it
  // What went wrong for it: a gap in a set's Execute seqs (a frame lost), a refusal, an error
  // response. Empty while all is well.
  std::string problem;
  uint64_t frames = 0, heartbeats = 0, executes = 0;
  std::vector<int32_t> lost;  // ranks the Faults it got named
};

// What a crew's wait does with one frame of one rank: true once the rank has what it waits for.
using OnFrame = std::function<bool(SimRank&, const zmq::message_t&)>;

class Crew {
 public:
  explicit Crew(std::vector<SimRank*> ranks) : ranks_(std::move(ranks)) {}
  const std::vector<SimRank*>& ranks() const { return ranks_; }

  // Sends one frame from `rank`; false (and `rank.problem` says why) if ZeroMQ refused it.
  static bool Send(SimRank& rank, const std::string& payload);
  // Receives until `on_frame` said done for every rank of `who`, or until `deadline` (false).
  bool Await(const std::vector<SimRank*>& who, const OnFrame& on_frame, Clock::time_point deadline);

  // The parse target of this crew's thread, reused so that steady steps do not allocate.
  wire::Frame& scratch() { return scratch_; }
  // Cache slots by tensor name, as this crew's ranks learned them from Executes, by job.
  std::unordered_map<int, std::unordered_map<std::string, uint32_t>>& learned_slots() {
    return learned_;
  }

  // Parses an Execute (or any frame) into scratch(); for Executes checks the set's seq and the
  // responses' errors, counts released tensors and learns cache slots. Returns the parsed frame,
  // or null if the bytes are no tutti frame.
  const wire::Frame* Read(SimRank& rank, const zmq::message_t& message);

 private:
  std::vector<SimRank*> ranks_;
  wire::Frame scratch_;
  std::unordered_map<int, std::unordered_map<std::string, uint32_t>> learned_;
};

class Fleet {
 public:
  // Sockets go into contexts of kSocketsPerContext with one I/O thread each: libzmq cancels a
  // heartbeat timer by a linear search of its I/O thread's timers, so one thread for thousands of
  // pinging sockets would spend the benchmark's CPU there rather than measure tuttid's.
  static constexpr int kSocketsPerContext = 256;
  // Creates and connects one rank's DEALER (routing id, heartbeats and limits as the client's).
  SimRank& Add(int job, int32_t rank, const std::string& endpoint);
  // Closes one rank's socket at once (no linger): the rank vanishes as a killed process would.
  void Vanish(SimRank& rank);
  std::vector<SimRank*> ranks() const;

 private:
  std::vector<std::unique_ptr<zmq::context_t>> contexts_;
  std::vector<std::unique_ptr<SimRank>> ranks_;  // declared after: closed before contexts_ end
};

// Splits `ranks` into `crews` slices of consecutive ranks.
std::vector<Crew> SplitIntoCrews(const std::vector<SimRank*>& ranks, int crews);
// The same, but a job's ranks (consecutive in `ranks`) are never split between crews.
std::vector<Crew> SplitJobsIntoCrews(const std::vector<SimRank*>& ranks, int crews);

// Runs `work(crew, index)` on one thread per crew and waits for all; true if every call did.
bool OnEveryCrew(std::vector<Crew>& crews, const std::function<bool(Crew&, size_t)>& work);

// A reusable barrier for the crews' threads (C++17 has no std::barrier).
class Barrier {
 public:
  explicit Barrier(size_t parties) : parties_(parties) {}
  void Wait();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t parties_, waiting_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace tutti::bench
