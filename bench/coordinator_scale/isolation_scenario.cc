// The isolation scenario (scenarios.h): --jobs jobs of --job-ranks ranks on one tuttid. Job 0 is
// the quiet one: its step latency is measured alone, then while job 1 floods tuttid (its ranks
// step as fast as tuttid answers them), while job 1 spams it (Heartbeats, open-loop, as a hostile
// job would), then while every other job floods.
#include <thread>

#include <fmt/format.h>

#include "coordinator_scale/scenarios.h"
#include "coordinator_scale/sim_job.h"

namespace tutti::bench {
namespace {

constexpr int32_t kWorld = 0;
// Heartbeats a spamming rank keeps unanswered: enough that tuttid always has its frames waiting.
constexpr int kSpamWindow = 64;

bool CheckRanks(const std::string& phase, const std::vector<SimRank*>& ranks, bool ok,
                Report* report) {
  const std::string problems = Problems(ranks);
  if (!problems.empty()) report->Failure(phase + ": " + problems);
  else if (!ok) report->Failure(phase + ": ranks waited past the phase's deadline");
  return ok && problems.empty();
}

}  // namespace

void RunIsolation(const ScenarioOptions& o, Report* report) {
  auto deadline = [&] { return Clock::now() + std::chrono::seconds(o.phase_timeout_s); };
  const std::string log = o.log_dir + "/coordinator_scale_isolation.log";
  TuttidProcess tuttid(o.tuttid, BenchTuttidArgs(), log);
  const int t = o.tensors;
  Fleet fleet;
  std::vector<SimJob> jobs(o.jobs);
  std::vector<SimRank*> all;
  for (int i = 0; i < o.jobs; ++i) {
    jobs[i].index = i;
    jobs[i].shape.job = fmt::format("isolation-{}", i);
    jobs[i].shape.size = o.job_ranks;
    jobs[i].shape.ranks_per_host = std::min(o.ranks_per_host, o.job_ranks);
    jobs[i].tensors = StepTensors(t);
    for (int32_t r = 0; r < o.job_ranks; ++r) {
      jobs[i].ranks.push_back(&fleet.Add(i, r, tuttid.endpoint()));
      all.push_back(jobs[i].ranks.back());
    }
  }
  std::vector<Crew> crews = SplitIntoCrews(all, o.threads);
  std::vector<Crew*> crew_list;
  for (Crew& c : crews) crew_list.push_back(&c);

  // Every job meets, runs its first step and a first cached one.
  ProcessSample before = tuttid.Sample();
  bool ok = OnEveryCrew(crews, [&](Crew& crew, size_t) { return RegisterAll(crew, jobs, deadline()); });
  report->Phase("isolation: rendezvous", before, tuttid.Sample(),
                CheckRanks("isolation: rendezvous", all, ok, report));
  if (!report->ok()) return;
  for (SimJob& job : jobs) job.first_step = AnnounceFull(job.ranks[0]->stamp, kWorld, job.tensors);
  auto every_job = [&](const std::string SimJob::*frame) {
    return OnEveryCrew(crews, [&, frame](Crew& crew, size_t) {
      return Step(crew, [&](const SimRank& r) { return &(jobs[r.job].*frame); },
                  [&](const SimRank&) { return t; }, deadline());
    });
  };
  before = tuttid.Sample();
  ok = every_job(&SimJob::first_step);
  report->Phase("isolation: first step", before, tuttid.Sample(),
                CheckRanks("isolation: first step", all, ok, report));
  if (!report->ok()) return;
  for (SimJob& job : jobs) {
    std::string problem;
    if (!CollectSlots(crew_list, &job, &problem)) return report->Failure("isolation: " + problem);
    job.cached_step = AnnounceCached(job.ranks[0]->stamp, kWorld, job.slots);
  }
  before = tuttid.Sample();
  ok = every_job(&SimJob::cached_step);
  report->Phase("isolation: first cached step", before, tuttid.Sample(),
                CheckRanks("isolation: first cached step", all, ok, report));
  if (!report->ok()) return;

  // The quiet job's steps, on this thread, one at a time.
  std::vector<Crew> quiet = SplitIntoCrews(jobs[0].ranks, 1);
  // `spam`: the flooders send Heartbeats open-loop (a hostile job) instead of stepping.
  auto quiet_steps = [&](const std::string& name, const std::vector<SimRank*>& flooders,
                         int flood_threads, bool spam = false) {
    std::vector<Crew> flood = SplitJobsIntoCrews(flooders, flood_threads);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> flood_steps{0};
    bool flood_ok = true;
    std::thread flooding;
    if (!flooders.empty())
      flooding = std::thread([&] {
        flood_ok = OnEveryCrew(flood, [&](Crew& crew, size_t) {
          return spam ? Spam(crew, jobs, kSpamWindow, stop, &flood_steps, deadline())
                      : Flood(crew, jobs, stop, &flood_steps, deadline());
        });
      });
    if (!flooders.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // flood on
    Latencies latencies;
    const ProcessSample start = tuttid.Sample();
    const uint64_t flood_start = flood_steps.load();
    bool quiet_ok = true;
    for (int s = 0; s < o.isolation_steps && quiet_ok; ++s) {
      const auto begin = Clock::now();
      quiet_ok = Step(quiet[0], [&](const SimRank&) { return &jobs[0].cached_step; },
                      [&](const SimRank&) { return t; }, deadline());
      latencies.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
    }
    const ProcessSample end = tuttid.Sample();
    const uint64_t flooded = flood_steps.load() - flood_start;
    stop = true;
    if (flooding.joinable()) flooding.join();
    std::vector<SimRank*> involved = jobs[0].ranks;
    involved.insert(involved.end(), flooders.begin(), flooders.end());
    const bool fine = CheckRanks(name, involved, quiet_ok && flood_ok, report);
    report->Phase(name, start, end, fine, o.isolation_steps,
                  flooders.empty() ? ""
                  : spam ? fmt::format("the spammers sent {:.0f} frames/s",
                                       flooded / Between(start, end).wall_s)
                         : fmt::format("flooders completed {:.0f} job steps/s",
                                       flooded / double(o.job_ranks) / Between(start, end).wall_s));
    report->Steps(name, latencies);
    return latencies.Percentile(99);
  };
  const double alone = quiet_steps("isolation: quiet job alone", {}, 0);
  if (!report->ok() || o.jobs < 2) return;
  const double one = quiet_steps("isolation: one job floods", jobs[1].ranks, 1);
  if (!report->ok()) return;
  const double spammed = quiet_steps("isolation: one job spams", jobs[1].ranks, 1, /*spam=*/true);
  if (!report->ok()) return;
  std::vector<SimRank*> others(all.begin() + o.job_ranks, all.end());
  const double rest = quiet_steps("isolation: all others flood", others, std::max(o.threads - 1, 1));
  report->Value("isolation: p99 ratio, one job floods", one / alone, "x alone");
  report->Value("isolation: p99 ratio, one job spams", spammed / alone, "x alone");
  report->Value("isolation: p99 ratio, all others flood", rest / alone, "x alone");
  tuttid.Stop();
  if (LogMentions(log, "stopped reading")) report->Failure("tuttid dropped frames (see " + log + ")");
}

}  // namespace tutti::bench
