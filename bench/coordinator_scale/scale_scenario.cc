// The scale scenario (scenarios.h): one job of --ranks simulated ranks against a tuttid of its
// own, phase after phase, each timed with what tuttid spent on it.
#include <algorithm>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "coordinator_scale/scenarios.h"
#include "coordinator_scale/sim_job.h"

namespace tutti::bench {
namespace {

constexpr int32_t kWorld = 0;
constexpr int64_t kCallTimeoutMs = 600000;

// Runs `work` on every crew as phase `name`, with tuttid sampled around it; the phase fails if a
// crew did or a rank of `ranks` has a problem.
bool TimedPhase(const std::string& name, TuttidProcess& tuttid, std::vector<Crew>& crews,
                const std::vector<SimRank*>& ranks, Report* report,
                const std::function<bool(Crew&, size_t)>& work, int units = 1,
                const std::string& unit = "") {
  const ProcessSample before = tuttid.Sample();
  bool ok = OnEveryCrew(crews, work);
  const ProcessSample after = tuttid.Sample();
  const std::string problems = Problems(ranks);
  if (!ok && problems.empty()) report->Failure(name + ": ranks waited past the phase's deadline");
  if (!problems.empty()) report->Failure(name + ": " + problems);
  ok = ok && problems.empty();
  report->Phase(name, before, after, ok, units, "", unit);
  return ok;
}

}  // namespace

bool LogMentions(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.find(text) != std::string::npos) return true;
  return false;
}

std::vector<std::string> BenchTuttidArgs() {
  return {"--log-level", "info", "--lease-ms", "600000", "--max-registrations-per-second", "0"};
}

void RunScale(const ScenarioOptions& o, Report* report) {
  const int32_t n = o.ranks;
  auto deadline = [&] { return Clock::now() + std::chrono::seconds(o.phase_timeout_s); };
  const std::string log = o.log_dir + "/coordinator_scale_tuttid.log";
  TuttidProcess tuttid(o.tuttid, BenchTuttidArgs(), log);
  const ProcessSample idle = tuttid.AwaitSettled(0, std::chrono::seconds(2));

  std::vector<SimJob> jobs(1);
  SimJob& job = jobs[0];
  job.shape.job = "scale";
  job.shape.size = n;
  job.shape.ranks_per_host = o.ranks_per_host;
  // Two static sets, the halves of the world, given at init by every rank (Horovod's
  // process_sets=[...]); set ids 1 and 2.
  std::vector<int32_t> low, high, evens;
  for (int32_t r = 0; r < n; ++r) {
    (r < n / 2 ? low : high).push_back(r);
    if (r % 2 == 0) evens.push_back(r);
  }
  if (n >= 2) job.shape.static_sets = {low, high};
  job.tensors = StepTensors(o.tensors);
  const int t = o.tensors;

  Fleet fleet;
  const auto connect_start = Clock::now();
  for (int32_t r = 0; r < n; ++r) job.ranks.push_back(&fleet.Add(0, r, tuttid.endpoint()));
  while (tuttid.Sample().open_fds < idle.open_fds + n &&
         Clock::now() < connect_start + std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // sampling /proc, not syncing
  report->Value("connect: every connection accepted",
                std::chrono::duration<double, std::milli>(Clock::now() - connect_start).count(), "ms");
  // ZeroMQ's own cost in tuttid: the connections before any rank said anything.
  const ProcessSample connected = tuttid.AwaitSettled(idle.open_fds + n, std::chrono::seconds(60));
  report->Value("zmq_rss_per_connection_in_tuttid", double(connected.rss_bytes - idle.rss_bytes) / n,
                "bytes");
  std::vector<Crew> crews = SplitIntoCrews(job.ranks, o.threads);
  std::vector<Crew*> crew_list;
  for (Crew& c : crews) crew_list.push_back(&c);

  if (!TimedPhase("rendezvous", tuttid, crews, job.ranks, report,
                  [&](Crew& crew, size_t) { return RegisterAll(crew, jobs, deadline()); }))
    return;
  const ProcessSample welcomed = tuttid.AwaitSettled(0, std::chrono::seconds(2));
  report->Value("tuttid_rss_per_rank_after_rendezvous", double(welcomed.rss_bytes - idle.rss_bytes) / n,
                "bytes (ZeroMQ's connections included)");
  const Stamp stamp = job.ranks[0]->stamp;
  for (SimRank* rank : job.ranks)
    if (rank->stamp.coordinator_epoch != stamp.coordinator_epoch)
      return report->Failure("ranks were welcomed into different coordinator epochs");

  // Static sets: each half runs its first step on its own set, both at once.
  const std::string low_step = AnnounceFull(stamp, 1, job.tensors);
  const std::string high_step = AnnounceFull(stamp, 2, job.tensors);
  if (n >= 2 && !TimedPhase("static sets: first step", tuttid, crews, job.ranks, report,
                            [&](Crew& crew, size_t) {
                              return Step(
                                  crew,
                                  [&](const SimRank& r) { return r.rank < n / 2 ? &low_step : &high_step; },
                                  [&](const SimRank&) { return t; }, deadline());
                            }))
    return;

  // A dynamic set: every rank adds the even ranks (non-members are answered at once, members once
  // every member asked), the members run a step on it, then remove it.
  const int32_t dynamic_id = n >= 2 ? 3 : 1;
  const std::string add = SetAddFrame(stamp, 1, evens, kCallTimeoutMs);
  const std::string on_dynamic = AnnounceFull(stamp, dynamic_id, job.tensors);
  const std::string remove = SetRemoveFrame(stamp, 2, dynamic_id, kCallTimeoutMs);
  auto replied = [&](SimRank& rank, const wire::Frame& frame, size_t members) {
    if (!frame.has_set_reply()) return false;
    const wire::SetReply& reply = frame.set_reply();
    if (reply.error().code() != 0 || reply.set().id() != dynamic_id ||
        static_cast<size_t>(reply.set().ranks_size()) != members)
      rank.problem = "unexpected SetReply: " + reply.error().message();
    return true;
  };
  auto is_even = [](const SimRank& r) { return r.rank % 2 == 0; };
  if (!TimedPhase("dynamic set: add", tuttid, crews, job.ranks, report, [&](Crew& crew, size_t) {
        return Exchange(
            crew, [&](const SimRank&) { return &add; }, [](const SimRank&) { return true; },
            [&](SimRank& r, const wire::Frame& f) { return replied(r, f, evens.size()); }, deadline());
      }))
    return;
  if (!TimedPhase("dynamic set: first step", tuttid, crews, job.ranks, report, [&](Crew& crew, size_t) {
        return Step(
            crew, [&](const SimRank& r) { return is_even(r) ? &on_dynamic : nullptr; },
            [&](const SimRank& r) { return is_even(r) ? t : 0; }, deadline());
      }))
    return;
  if (!TimedPhase("dynamic set: remove", tuttid, crews, job.ranks, report, [&](Crew& crew, size_t) {
        return Exchange(
            crew, [&](const SimRank& r) { return is_even(r) ? &remove : nullptr; }, is_even,
            [&](SimRank& r, const wire::Frame& f) { return replied(r, f, evens.size()); }, deadline());
      }))
    return;

  // The world: a first step of full specs, then steps of cache bits.
  job.first_step = AnnounceFull(stamp, kWorld, job.tensors);
  auto world_step = [&](const std::string* frame) {
    return [&, frame](Crew& crew, size_t) {
      return Step(crew, [frame](const SimRank&) { return frame; },
                  [&](const SimRank&) { return t; }, deadline());
    };
  };
  if (!TimedPhase("world: first step", tuttid, crews, job.ranks, report, world_step(&job.first_step)))
    return;
  std::string problem;
  if (!CollectSlots(crew_list, &job, &problem)) return report->Failure("first step: " + problem);
  job.cached_step = AnnounceCached(stamp, kWorld, job.slots);
  if (!TimedPhase("world: first cached step", tuttid, crews, job.ranks, report,
                  world_step(&job.cached_step)))
    return;

  // Steady state: every step all ranks announce their cache bits and wait for the release.
  Barrier barrier(crews.size());
  Latencies latencies;
  const ProcessSample steady_before = tuttid.Sample();
  bool ok = OnEveryCrew(crews, [&](Crew& crew, size_t index) {
    bool crew_ok = true;
    for (int s = 0; s < o.steps; ++s) {
      barrier.Wait();
      const auto start = Clock::now();
      crew_ok = Step(crew, [&](const SimRank&) { return &job.cached_step; },
                     [&](const SimRank&) { return t; }, deadline()) && crew_ok;
      barrier.Wait();
      if (index == 0)
        latencies.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    return crew_ok;
  });
  const ProcessSample steady_after = tuttid.Sample();
  problem = Problems(job.ranks);
  if (!problem.empty()) report->Failure("steady steps: " + problem);
  report->Phase("world: steady step", steady_before, steady_after, ok && problem.empty(), o.steps);
  report->Steps("world: steady step", latencies);
  const ProcessSample stepped = tuttid.AwaitSettled(0, std::chrono::seconds(2));
  report->Value("tuttid_rss_per_rank_after_steps", double(stepped.rss_bytes - idle.rss_bytes) / n,
                "bytes (ZeroMQ's connections included)");
  if (!ok || !problem.empty()) return;

  // Idle: what the ranks' liveness costs tuttid. Each rank's I/O thread sends a Heartbeat every
  // interval (1 s), which tuttid echoes; here for kIdleSeconds seconds.
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  heartbeat.set_membership_epoch(stamp.membership_epoch);
  const std::string heartbeat_bytes = wire::Encode(heartbeat, stamp.coordinator_epoch);
  constexpr int kIdleSeconds = 3;
  const auto idle_start = Clock::now();
  if (!TimedPhase("idle: heartbeats, 1/s/rank", tuttid, crews, job.ranks, report,
                  [&](Crew& crew, size_t) {
                    for (int second = 0; second < kIdleSeconds; ++second) {
                      std::vector<uint64_t> before;
                      for (SimRank* r : crew.ranks()) before.push_back(r->heartbeats);
                      if (!Exchange(
                              crew, [&](const SimRank&) { return &heartbeat_bytes; },
                              [](const SimRank&) { return true; },
                              [&](SimRank& r, const wire::Frame&) {
                                // A crew's ranks are consecutive ranks of the job.
                                return r.heartbeats > before[r.rank - crew.ranks()[0]->rank];
                              },
                              deadline()))
                        return false;
                      std::this_thread::sleep_until(idle_start + std::chrono::seconds(second + 1));
                    }
                    return true;
                  },
                  kIdleSeconds, "s"))
    return;

  // Joins: the odd ranks join the world; the even ranks' next tensors run without them (partial
  // responses every member gets); then the even ranks join, and every rank hears who came last.
  const int j = std::min(o.join_tensors, t);
  const std::string join_odd = JoinFrame(stamp, 3, kWorld, kCallTimeoutMs);
  const std::string join_even = JoinFrame(stamp, 4, kWorld, kCallTimeoutMs);
  const std::string partial_step = AnnounceCached(
      stamp, kWorld, std::vector<uint32_t>(job.slots.begin(), job.slots.begin() + j));
  std::vector<int> join_replies(n, 0);
  auto join_reply = [&](SimRank& r, const wire::Frame& f) {
    if (!f.has_set_reply()) return false;
    if (f.set_reply().error().code() != 0 || f.set_reply().last_rank() < 0)
      r.problem = "join failed: " + f.set_reply().error().message();
    return true;
  };
  if (!TimedPhase("joins", tuttid, crews, job.ranks, report, [&](Crew& crew, size_t) {
        for (SimRank* r : crew.ranks()) r->released = 0;
        // Odd ranks join; even ranks announce j tensors, which release without the odd ones.
        bool ok = Exchange(
            crew, [&](const SimRank& r) { return is_even(r) ? &partial_step : &join_odd; },
            [](const SimRank&) { return true; },
            [&](SimRank& r, const wire::Frame& f) {
              if (f.has_set_reply()) ++join_replies[r.rank];  // an odd rank's reply may come early
              return r.released >= j;
            },
            deadline());
        return ok && Exchange(
                         crew, [&](const SimRank& r) { return is_even(r) ? &join_even : nullptr; },
                         [&](const SimRank& r) { return join_replies[r.rank] == 0; }, join_reply,
                         deadline());
      }))
    return;

  // What tuttid says it sent, against what the ranks received: no Execute went missing.
  uint64_t received = 0;
  for (const SimRank* r : job.ranks) received += r->executes;
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(9);
  query.set_membership_epoch(stamp.membership_epoch);
  const std::string query_bytes = wire::Encode(query, stamp.coordinator_epoch);
  std::vector<Crew> first_only = SplitIntoCrews({job.ranks[0]}, 1);
  uint64_t sent = 0;
  Exchange(
      first_only[0], [&](const SimRank&) { return &query_bytes; }, [](const SimRank&) { return true; },
      [&](SimRank&, const wire::Frame& f) {
        if (!f.has_coordinator_counters()) return false;
        sent = f.coordinator_counters().execute_messages();
        return true;
      },
      deadline());
  report->Value("executes_sent_by_tuttid", static_cast<double>(sent), "frames");
  report->Value("executes_received_by_ranks", static_cast<double>(received), "frames");
  if (sent != received)
    report->Failure(fmt::format("tuttid sent {} Executes, the ranks received {}", sent, received));

  // A rank vanishes (its process killed): every other rank must be told, by a Fault naming it.
  SimRank& lost = *job.ranks[n - 1];
  const int32_t lost_rank = lost.rank;
  const ProcessSample fault_before = tuttid.Sample();
  fleet.Vanish(lost);
  ok = OnEveryCrew(crews, [&](Crew& crew, size_t) {
    return Exchange(
        crew, [](const SimRank&) { return nullptr; },
        [&](const SimRank& r) { return r.rank != lost_rank; },
        [&](SimRank& r, const wire::Frame&) {
          return std::find(r.lost.begin(), r.lost.end(), lost_rank) != r.lost.end();
        },
        deadline());
  });
  const ProcessSample fault_after = tuttid.Sample();
  report->Phase("fault: rank vanishes", fault_before, fault_after, ok,
                1, "time until every other rank got the Fault");
  if (!ok) report->Failure("fault: not every rank was told of the lost rank");
  tuttid.Stop();
  // tuttid drops a frame only for a rank that stops reading (and says so): none may.
  if (LogMentions(log, "stopped reading")) report->Failure("tuttid dropped frames (see " + log + ")");

  // tuttid's state per rank: its growth since before the first connection, less what ZeroMQ keeps
  // per connection by itself, measured apart with frames of the same sizes (zmq_cost.cc).
  const ZmqConnectionCost zmq = MeasureZmqConnectionCost(
      n, RegisterFrame(job.shape, 0).size(), job.ranks[0]->welcome.bytes, o.threads);
  if (!zmq.ok) return report->Failure("ZeroMQ's cost per connection could not be measured");
  report->Value("zmq_rss_per_connection", zmq.per_connection,
                "bytes (a bare ROUTER after a Register and a Welcome of these sizes)");
  report->Value("zmq_rss_per_busy_connection", zmq.per_busy_connection,
                fmt::format("bytes (and {} small frames each way)", ZmqConnectionCost::kSmallRoundTrips));
  const double state = double(welcomed.rss_bytes - idle.rss_bytes) / n - zmq.per_connection;
  report->Value("tuttid_state_per_rank_after_rendezvous", state, "bytes");

  // The same job through the coordinator core alone: the negotiation without ZeroMQ's I/O, and
  // the core's memory to the byte (core_scenario.cc).
  RunCore(o, report);
}

}  // namespace tutti::bench
