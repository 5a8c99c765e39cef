// The core scenario (scenarios.h): tuttid's coordinator core alone, in this process, without a
// socket (it is socket-free so that fuzzers and this can drive it). The same frames as the scale
// scenario's ranks send, fed in batches as tuttid's event loop feeds them (at most 256 frames, then
// Flush and Tick: server/service/coordinator.cc). What it measures is what ZeroMQ's I/O hides in
// the real process: the negotiation's own CPU time per step (this thread's), and the core's own
// memory per rank (the allocator's bytes in use, mallinfo2), apart from ZeroMQ's per connection.
#include <malloc.h>
#include <time.h>

#include <fmt/format.h>

#include "coordinator_scale/scenarios.h"
#include "coordinator_scale/wire_frames.h"
#include "server/core/coordinator_core.h"

namespace tutti::bench {
namespace {

using server::CoordinatorCore;
using server::Outbox;

constexpr int kBatch = 256;  // frames the event loop reads before it flushes (coordinator.cc)

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

size_t HeapInUse() { return mallinfo2().uordblks; }

// Feeds one frame from every rank, as one pass of the event loop per kBatch frames; returns how
// many frames the core sent each rank, those of the ranks `kept` names decoded, and the CPU time
// the core took.
struct Pass {
  std::vector<int> frames;                        // by rank
  std::vector<size_t> bytes;                      // by rank, as sent
  std::vector<std::vector<wire::Frame>> received;  // by rank, for the kept ones
  double cpu_s = 0;
};
Pass FeedAll(CoordinatorCore& core, const std::vector<std::string>& peers,
             const std::function<const std::string&(int32_t)>& frame_of,
             const std::function<bool(int32_t)>& kept) {
  Pass pass;
  pass.frames.resize(peers.size());
  pass.bytes.resize(peers.size());
  pass.received.resize(peers.size());
  std::unordered_map<std::string, int32_t> rank_of;
  for (size_t r = 0; r < peers.size(); ++r) rank_of[peers[r]] = static_cast<int32_t>(r);
  Outbox out;
  // Only the core's calls are timed, not the decoding of what it sent (the ranks' work).
  for (size_t r = 0; r < peers.size(); ++r) {
    const std::string& frame = frame_of(static_cast<int32_t>(r));
    const double start = ThreadCpuSeconds();
    core.HandleFrame(peers[r], frame.data(), frame.size(), server::Clock::now(), &out);
    if ((r + 1) % kBatch == 0 || r + 1 == peers.size()) {
      core.Flush(&out);
      core.Tick(server::Clock::now(), &out);
      (void)core.NextDeadline();
    }
    pass.cpu_s += ThreadCpuSeconds() - start;
    for (const auto& o : out) {
      const int32_t to = rank_of.at(o.peer);
      ++pass.frames[to];
      pass.bytes[to] += o.frame->size() + o.own.size();
      if (kept(to)) pass.received[to].push_back(server::frames::Decode(o));
    }
    out.clear();
  }
  return pass;
}

}  // namespace

void RunCore(const ScenarioOptions& o, Report* report) {
  const int32_t n = o.ranks;
  server::Job::Policy policy{1000, 600000};
  CoordinatorCore core(600000, /*epoch=*/0x5ca1e, policy, 1024);
  JobShape shape;
  shape.job = "core";
  shape.size = n;
  shape.ranks_per_host = o.ranks_per_host;
  std::vector<int32_t> low, high;
  for (int32_t r = 0; r < n; ++r) (r < n / 2 ? low : high).push_back(r);
  if (n >= 2) shape.static_sets = {low, high};
  std::vector<std::string> peers, registers;
  for (int32_t r = 0; r < n; ++r) peers.push_back(RoutingId(0, r));
  const size_t heap_before = HeapInUse();
  for (int32_t r = 0; r < n; ++r) registers.push_back(RegisterFrame(shape, r));

  // The rendezvous; the frames it sends are checked, then dropped before the heap is read again.
  // Every rank gets one frame; a sample of them (decoding thousands of Welcomes of thousands of
  // peers would be most of this scenario's time) is checked to be a whole Welcome.
  auto sampled = [n](int32_t r) { return r % 64 == 0 || r == n - 1; };
  Pass rendezvous = FeedAll(
      core, peers, [&](int32_t r) -> const std::string& { return registers[r]; }, sampled);
  Stamp stamp;
  for (int32_t r = 0; r < n; ++r) {
    const auto& got = rendezvous.received[r];
    if (rendezvous.frames[r] != 1 ||
        (sampled(r) && (!got[0].has_welcome() || got[0].welcome().peers_size() != n)))
      return report->Failure(fmt::format("core: rank {} did not get one Welcome of {} peers", r, n));
    if (r == 0) stamp = Stamp{got[0].welcome().coordinator_epoch(), got[0].welcome().membership_epoch()};
  }
  rendezvous.received.clear();
  rendezvous.received.shrink_to_fit();
  registers.clear();
  registers.shrink_to_fit();
  malloc_trim(0);
  const size_t heap_welcomed = HeapInUse();
  report->Value("core: rendezvous cpu", rendezvous.cpu_s * 1000, "ms (Welcomes encoded, not sent)");
  report->Value("core: Welcome bytes", static_cast<double>(rendezvous.bytes[0]), "bytes (rank 0's)");
  report->Value("core: state per rank after rendezvous",
                double(heap_welcomed) / n - double(heap_before) / n, "bytes");

  // The first step, in full; then cached steps.
  const std::vector<wire::TensorSpec> tensors = StepTensors(o.tensors);
  const std::string first = AnnounceFull(stamp, 0, tensors);
  Pass step = FeedAll(
      core, peers, [&](int32_t) -> const std::string& { return first; },
      [](int32_t r) { return r == 0; });
  report->Value("core: first step cpu", step.cpu_s * 1000, "ms");
  std::vector<uint32_t> slots(tensors.size(), UINT32_MAX);
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < tensors.size(); ++i) index_of[tensors[i].name()] = i;
  int released = 0;
  for (const wire::Frame& f : step.received[0]) {
    if (!f.has_execute()) continue;
    released += TensorsReleased(f.execute());
    for (const auto& r : f.execute().responses()) {
      if (r.cache_slot() && r.has_spec()) slots[index_of.at(r.spec().name())] = r.cache_slot() - 1;
      for (const auto& part : r.fused())
        if (part.cache_slot() && !part.name().empty()) slots[index_of.at(part.name())] = part.cache_slot() - 1;
    }
  }
  for (int32_t r = 1; r < n; ++r)
    if (step.frames[r] != step.frames[0])
      return report->Failure(fmt::format("core: rank {} got {} frames at the first step, rank 0 {}",
                                         r, step.frames[r], step.frames[0]));
  if (released != o.tensors || std::count(slots.begin(), slots.end(), UINT32_MAX) != 0)
    return report->Failure(fmt::format("core: the first step released {} of {} tensors with slots",
                                       released, o.tensors));
  step.received.clear();
  const std::string cached = AnnounceCached(stamp, 0, slots);
  Latencies cpu;
  for (int s = 0; s < o.steps; ++s) {
    // The first cached step is checked on every rank, and not timed.
    Pass p = FeedAll(
        core, peers, [&](int32_t) -> const std::string& { return cached; },
        [s](int32_t) { return s == 0; });
    if (s > 0) {
      cpu.ms.push_back(p.cpu_s * 1000);
      continue;
    }
    for (int32_t r = 0; r < n; ++r) {
      int got = 0;
      for (const wire::Frame& f : p.received[r])
        if (f.has_execute()) got += TensorsReleased(f.execute());
      if (got != o.tensors)
        return report->Failure(fmt::format("core: rank {} got {} tensors in a cached step", r, got));
    }
  }
  report->Steps("core: steady step cpu", cpu);
  double total = 0;
  for (double ms : cpu.ms) total += ms;
  report->Value("core: steady step cpu, mean", cpu.ms.empty() ? 0 : total / cpu.ms.size(), "ms");
  malloc_trim(0);
  const double state = double(HeapInUse()) / n - double(heap_before) / n;
  report->Value("core: state per rank after steps", state, "bytes");
  if (o.max_state_bytes_per_rank > 0 && state > o.max_state_bytes_per_rank)
    report->Failure(fmt::format("core: {:.0f} bytes per rank, above the bound of {:.0f}", state,
                                o.max_state_bytes_per_rank));
}

}  // namespace tutti::bench
