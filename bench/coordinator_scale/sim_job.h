// One simulated job and the rounds its ranks go through: registration until the Welcome, a step
// (announce, then wait for the Executes that release every tensor), set changes, joins. Each
// function runs on a crew's thread over the crew's ranks of the job(s) it is given; the phases of
// the scenarios (scale_scenario.cc, isolation_scenario.cc) are built from them.
// A SimJob is filled by the main thread before the crews run and read-only while they do, except
// through the ranks each crew owns.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator_scale/sim_ranks.h"
#include "coordinator_scale/wire_frames.h"

namespace tutti::bench {

struct SimJob {
  int index = 0;
  JobShape shape;
  std::vector<SimRank*> ranks;  // by rank
  std::vector<wire::TensorSpec> tensors;
  // The world's cache slots of `tensors`, learned from the first step's Executes.
  std::vector<uint32_t> slots;
  // Frames every rank of the job sends alike (its stamp is the same on every rank), built once.
  std::string first_step, cached_step;
};

// Every rank of the crew registers, then waits for its Welcome (a Refusal is a problem).
bool RegisterAll(Crew& crew, const std::vector<SimJob>& jobs, Clock::time_point deadline);

// The ranks of the crew for which `frame_of` gives a frame send it; then every rank `waits` names
// reads its frames (Crew::Read) until `done` says it has what it waited for, or it has a problem.
using FrameOf = std::function<const std::string*(const SimRank&)>;
using Waits = std::function<bool(const SimRank&)>;
using Done = std::function<bool(SimRank&, const wire::Frame&)>;
bool Exchange(Crew& crew, const FrameOf& frame_of, const Waits& waits, const Done& done,
              Clock::time_point deadline);

// An Exchange that waits until `tensors_due` tensors were released to each rank (0: it waits for
// nothing).
using TensorsDue = std::function<int(const SimRank&)>;
bool Step(Crew& crew, const FrameOf& frame_of, const TensorsDue& tensors_due,
          Clock::time_point deadline);

// Closed-loop steps of the crew's jobs as fast as tuttid answers, each rank on its own (no
// barrier): a rank announces its job's cached step again as soon as the last one was released to
// it, until `stop`; then each job finishes the last step one of its ranks had sent. A job's ranks
// must all be in the crew (SplitJobsIntoCrews). Counts steps completed by ranks.
bool Flood(Crew& crew, const std::vector<SimJob>& jobs, const std::atomic<bool>& stop,
           std::atomic<uint64_t>* rank_steps, Clock::time_point deadline);

// A hostile flood: the crew's ranks send Heartbeats open-loop, as fast as their sockets take them
// (up to `window` per rank and round), until `stop`. tuttid reads them all and answers at most two
// per heartbeat interval and rank. Counts the frames sent.
bool Spam(Crew& crew, const std::vector<SimJob>& jobs, int window, const std::atomic<bool>& stop,
          std::atomic<uint64_t>* sent, Clock::time_point deadline);

// After the first step: the slots the crews learned for `job`'s tensors (all crews must agree).
bool CollectSlots(const std::vector<Crew*>& crews, SimJob* job, std::string* problem);

// The first problem of any of `ranks`, and how many have one ("" if none).
std::string Problems(const std::vector<SimRank*>& ranks);

}  // namespace tutti::bench
