// The members' fast path (docs/steady-state.md) across real processes: steady steps that never
// reach tuttid after the second, a randomized schedule that mixes cached, new and changed tensors
// with set changes, and a join that ends the fast path.
#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <random>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

void Wait(const char* what, tutti_request_t request) {
  tutti_status_t status = tutti_request_wait(request, -1);
  if (status != TUTTI_OK) Die(what, status);
}

tutti_coordinator_set_counters_t SetCounters(int32_t set_id) {
  tutti_coordinator_set_counters_t c = TUTTI_COORDINATOR_SET_COUNTERS_INIT;
  Check("set counters", tutti_get_coordinator_set_counters(rt, set_id, &c));
  return c;
}

tutti_counters_t OwnCounters() {
  tutti_counters_t c = TUTTI_COUNTERS_INIT;
  Check("counters", tutti_get_counters(rt, &c));
  return c;
}

// One step on `set` (members `members`): six allreduces that fuse, an allgather and a broadcast,
// each checked. Values depend on the step, so a stale or misrouted result shows. `longer` lengthens
// every allreduce, as a new layer size or a benchmark's next message size does.
bool Step(int32_t set, const std::vector<int32_t>& members, int step, int64_t longer = 0) {
  const int n = static_cast<int>(members.size());
  const std::string prefix = "s" + std::to_string(set) + ".";
  std::vector<Tensor> grads;
  grads.reserve(6);
  std::vector<tutti_request_t> requests;
  for (int i = 0; i < 6; ++i) {
    grads.emplace_back(TUTTI_DTYPE_FLOAT32, 256 + 64 * i + longer, 4);
    for (int64_t k = 0; k < grads[i].shape[0]; ++k)
      grads[i].as<float>()[k] = static_cast<float>(my_rank + i + step);
    tutti_request_t r;
    Check("allreduce", tutti_allreduce(rt, (prefix + "grad" + std::to_string(i)).c_str(), set,
                                       &grads[i].desc, &grads[i].desc, nullptr, &r));
    requests.push_back(r);
  }
  Tensor rows(TUTTI_DTYPE_INT32, 2, 4);
  rows.as<int32_t>()[0] = my_rank;
  rows.as<int32_t>()[1] = step;
  tutti_request_t gathered;
  Check("allgather", tutti_allgather(rt, (prefix + "rows").c_str(), set, &rows.desc, &gathered));
  Tensor weights(TUTTI_DTYPE_INT64, 16, 8);
  for (int k = 0; k < 16; ++k) weights.as<int64_t>()[k] = my_rank == members.back() ? step * 100 + k : -1;
  tutti_request_t broadcast;
  Check("broadcast", tutti_broadcast(rt, (prefix + "weights").c_str(), set, &weights.desc,
                                     members.back(), &broadcast));
  for (auto r : requests) {
    Wait("grad", r);
    tutti_request_free(r);
  }
  Wait("rows", gathered);
  Wait("weights", broadcast);
  float rank_sum = 0;
  for (int32_t m : members) rank_sum += static_cast<float>(m);
  bool ok = true;
  for (int i = 0; i < 6; ++i) {
    const float expected = rank_sum + static_cast<float>(n * (i + step));
    for (int64_t k = 0; k < grads[i].shape[0]; ++k)
      if (grads[i].as<float>()[k] != expected) ok = false;
  }
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  Check("rows output", tutti_request_output(gathered, &out));
  const int32_t* got = static_cast<const int32_t*>(out.data);
  if (out.shape[0] != 2 * n) ok = false;
  for (int j = 0; ok && j < n; ++j)
    if (got[2 * j] != members[j] || got[2 * j + 1] != step) ok = false;
  tutti_request_free(gathered);
  tutti_request_free(broadcast);
  for (int k = 0; k < 16; ++k)
    if (weights.as<int64_t>()[k] != step * 100 + k) ok = false;
  if (!ok) Say("fail set %d step %d", set, step);
  return ok;
}

// `steps` steps on the world and on the set {0, 1}, alternating. After step 2 and at the end,
// prints "counters <when> world=<announcements> pair=<announcements> grants=<n> exits=<n>" from
// tuttid's counters, then "rounds=<n> tensors=<n>" from this rank's. With `reshape_at` > 0, every
// rank lengthens every allreduce from that step on and reports "counters reshaped" two steps later.
int SteadyState(int steps, int reshape_at) {
  const int32_t pair_ranks[] = {0, 1};
  int32_t pair = -1;
  Check("add pair", tutti_process_set_add(rt, pair_ranks, 2, 0, &pair));
  std::vector<int32_t> world;
  for (int r = 0; r < world_size; ++r) world.push_back(r);
  const bool in_pair = my_rank < 2;
  auto report = [&](const char* when) {
    const auto w = SetCounters(0), p = SetCounters(pair);
    const auto own = OwnCounters();
    Say("counters %s world=%" PRIu64 " pair=%" PRIu64 " grants=%" PRIu64 " exits=%" PRIu64
        " rounds=%" PRIu64 " tensors=%" PRIu64,
        when, w.announcements, p.announcements, w.fast_path_grants + p.fast_path_grants,
        w.fast_path_exits + p.fast_path_exits, own.fast_path_rounds, own.fast_path_tensors);
  };
  for (int step = 0; step < steps; ++step) {
    const int64_t longer = reshape_at > 0 && step >= reshape_at ? 32 : 0;
    if (!Step(TUTTI_WORLD, world, step, longer)) return 1;
    if (in_pair && !Step(pair, {0, 1}, step, longer)) return 1;
    if (step == 2) report("early");
    if (reshape_at > 0 && step == reshape_at + 2) report("reshaped");
  }
  // No barrier here: an automatically named barrier is a new tensor, which takes the world back
  // to tuttid. A rank that finalizes first leaves nothing waiting on the others: every step
  // was agreed on every member before any finished it.
  report("late");
  Say("steady ok");
  return 0;
}

// A randomized schedule, the same on every rank (`seed`), submitted in an order of each rank's
// own. Each step submits some of twelve names; now and then every rank changes one tensor's
// length (tuttid negotiates it afresh, then it is cached again), one rank alone changes one (every
// rank must get the same MISMATCH, never a result), a name appears for the first time, or the
// set {0, 1} is added or removed. Every result is checked; prints "schedule ok".
int Schedule(uint64_t seed, int steps) {
  std::mt19937_64 shared(seed);
  std::mt19937_64 own(seed * 1000003 + static_cast<uint64_t>(my_rank));
  std::vector<int64_t> length(16, 64);
  int32_t pair = -1;
  int fresh = 12;
  for (int step = 0; step < steps; ++step) {
    const uint64_t event = shared() % 10;
    const int changed = static_cast<int>(shared() % 12);
    const int odd_rank = static_cast<int>(shared() % static_cast<uint64_t>(world_size));
    if (event == 0) length[changed] = 32 + static_cast<int64_t>(shared() % 96);
    std::vector<int> names;
    for (int i = 0; i < 12; ++i)
      if (shared() % 3 != 0) names.push_back(i);
    if (event == 2) names.push_back(fresh++);
    if (event == 3 && pair < 0 && world_size > 2) {
      const int32_t ranks[] = {0, 1};
      Check("add pair", tutti_process_set_add(rt, ranks, 2, 0, &pair));
    } else if (event == 4 && pair >= 0) {
      Check("remove pair", tutti_process_set_remove(rt, pair, 0));
      pair = -1;
    }
    std::shuffle(names.begin(), names.end(), own);
    struct Submitted {
      int name;
      bool odd;
      Tensor t;
      tutti_request_t request;
    };
    std::vector<Submitted> submitted;
    submitted.reserve(names.size() + 1);
    for (int name : names) {
      const bool odd = event == 1 && name == changed;
      int64_t count = name < 16 ? length[name] : 64;
      if (odd && my_rank == odd_rank) count += 1;
      submitted.push_back({name, odd, Tensor(TUTTI_DTYPE_FLOAT32, count, 4), nullptr});
      Submitted& s = submitted.back();
      for (int64_t k = 0; k < count; ++k) s.t.as<float>()[k] = static_cast<float>(my_rank * 7 + name + step);
      const std::string tensor = "t" + std::to_string(name);
      Check("allreduce", tutti_allreduce(rt, tensor.c_str(), TUTTI_WORLD, &s.t.desc, &s.t.desc,
                                         nullptr, &s.request));
    }
    if (pair >= 0 && my_rank < 2) SumOnSet("pair.sum", pair, 32);
    for (auto& s : submitted) {
      const tutti_status_t status = tutti_request_wait(s.request, -1);
      const std::string error = tutti_last_error();
      tutti_request_free(s.request);
      if (s.odd) {
        if (status != TUTTI_ERR_MISMATCH) {
          Say("fail step %d t%d: status %d, expected a mismatch", step, s.name, status);
          return 1;
        }
        continue;
      }
      if (status != TUTTI_OK) {
        Say("fail step %d t%d: %d %s", step, s.name, status, error.c_str());
        return 1;
      }
      const float expected = static_cast<float>(7 * world_size * (world_size - 1) / 2 +
                                                world_size * (s.name + step));
      for (int64_t k = 0; k < s.t.shape[0]; ++k)
        if (s.t.as<float>()[k] != expected) {
          Say("fail step %d t%d[%" PRId64 "]: %g, expected %g", step, s.name, k,
              s.t.as<float>()[k], expected);
          return 1;
        }
    }
  }
  const auto counters = OwnCounters();
  Say("schedule ok rounds=%" PRIu64, counters.fast_path_rounds);
  return 0;
}

// Steady steps, then the last rank joins while the others run two more steps: their fast path
// ends at the join, and the joined rank takes part with zeros. Prints "join last=<rank>".
int JoinAfterSteadySteps() {
  std::vector<int32_t> world;
  for (int r = 0; r < world_size; ++r) world.push_back(r);
  for (int step = 0; step < 4; ++step)
    if (!Step(TUTTI_WORLD, world, step)) return 1;
  if (my_rank != world_size - 1) {
    for (int step = 0; step < 2; ++step) {
      Tensor t(TUTTI_DTYPE_FLOAT32, 8, 4);
      for (int k = 0; k < 8; ++k) t.as<float>()[k] = 1.0f;
      if (Allreduce("after.join", TUTTI_WORLD, t) != TUTTI_OK) return 1;
      if (t.as<float>()[0] != static_cast<float>(world_size - 1)) {
        Say("fail join step %d: %g", step, t.as<float>()[0]);
        return 1;
      }
    }
  }
  int32_t last = -1;
  Check("join", tutti_join(rt, TUTTI_WORLD, 0, &last));
  Say("join last=%d", last);
  return 0;
}

std::atomic<bool> go{false};

// World of 5: S={0,1,2} and D={3,4} each loop one cached 1 KiB allreduce ("s <i>", "d <i>"), so
// both run on their fast path. A failure prints "<label> failed <status> <message>", then
// "after <status> <message>" for one more submission. At "go" everyone stops; D's members print
// "counters d exits=<n> grants=<n>" from tuttid's counters of D.
int KillDuringRounds() {
  std::thread([] {
    AwaitGo();
    go = true;
  }).detach();
  const int32_t s_ranks[] = {0, 1, 2}, d_ranks[] = {3, 4};
  int32_t s_set, d_set;
  Check("add S", tutti_process_set_add(rt, s_ranks, 3, 0, &s_set));
  Check("add D", tutti_process_set_add(rt, d_ranks, 2, 0, &d_set));
  const bool in_d = my_rank >= 3;
  const int32_t set = in_d ? d_set : s_set;
  const char* label = in_d ? "d" : "s";
  Tensor t(TUTTI_DTYPE_FLOAT32, 256, 4);
  for (int i = 0; !go; ++i) {
    if (Allreduce(label, set, t) != TUTTI_OK) {
      Say("%s failed %s", label, last_failure.c_str());
      tutti_request_t request = nullptr;
      const tutti_status_t status = tutti_allreduce(rt, label, set, &t.desc, &t.desc, nullptr, &request);
      Say("after %d %s", status, tutti_last_error());
      if (request) {
        tutti_request_wait(request, 1000);
        tutti_request_free(request);
      }
      break;
    }
    Say("%s %d", label, i);
  }
  while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (in_d) {
    const auto c = SetCounters(d_set);
    Say("counters d exits=%" PRIu64 " grants=%" PRIu64, c.fast_path_exits, c.fast_path_grants);
  }
  return 0;
}

// Three steady steps of "x" on the world, so that it is on the fast path; then ranks 0 and 1
// submit "x" again and rank 2 never does (it waits for "go"). The tensor waits in their books
// past its patience, goes back to tuttid, and tuttid's stall inspector fails it ("status x ...").
int StallOnTheFastPath() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 64, 4);
  for (int step = 0; step < 3; ++step)
    if (Allreduce("x", TUTTI_WORLD, t) != TUTTI_OK) return 1;
  if (my_rank == 2) {
    AwaitGo();
    return 0;
  }
  Allreduce("x", TUTTI_WORLD, t);
  return 0;
}

const ScenarioRegistrar registered = {
    {"fast_path_stall", StallOnTheFastPath},
    {"fast_path_kill", KillDuringRounds},
    {"steady_state",
     [](const ScenarioArgs& args) {
       return SteadyState(args.empty() ? 1000 : std::atoi(args[0].c_str()),
                          args.size() > 1 ? std::atoi(args[1].c_str()) : 0);
     }},
    {"fast_path_schedule",
     [](const ScenarioArgs& args) {
       return Schedule(args.size() > 0 ? std::strtoull(args[0].c_str(), nullptr, 10) : 1,
                       args.size() > 1 ? std::atoi(args[1].c_str()) : 60);
     }},
    {"fast_path_join", JoinAfterSteadySteps},
};

}  // namespace
}  // namespace worker
