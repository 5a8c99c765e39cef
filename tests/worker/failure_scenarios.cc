// Scenarios of the failure tests (tests/multiproc/failure_test.cc) and the bad-frames test: ranks
// that the harness kills, freezes or forks, a coordinator that goes away, finalize and abort with
// a request in flight, and steady traffic to disturb.
#include <tutti/tutti.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Set while the harness has not yet written "go": loops run until then.
std::atomic<bool> go_seen{false};

void WatchForGo() {
  std::thread([] {
    AwaitGo();
    go_seen = true;
  }).detach();
}

// Allreduces on `set` until "go"; prints "<label> <i>" after each success, or
// "<label> failed <status> <message>" once and returns.
void LoopUntilGo(const char* label, int32_t set) {
  for (int i = 0; !go_seen; ++i) {
    Tensor t(TUTTI_DTYPE_FLOAT32, 256, 4);
    std::string name = std::string(label) + "." + std::to_string(i);
    if (Allreduce(name.c_str(), set, t) != TUTTI_OK) {
      Say("%s failed %s", label, last_failure.c_str());
      while (!go_seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    Say("%s %d", label, i);
  }
}

// World of 5: S={0,1,2} loops 64 MiB allreduces ("big started <i>" when submitted, "big ok <i>",
// or "big failed <status> <message>" then "after <status> <message>" for one more submission);
// D={3,4} loops small ones ("d <i>"). Everyone stops at "go".
int BigWithBystanders() {
  int32_t s_ranks[] = {0, 1, 2}, d_ranks[] = {3, 4}, s, d;
  Check("add S", tutti_process_set_add(rt, s_ranks, 3, 0, &s));
  Check("add D", tutti_process_set_add(rt, d_ranks, 2, 0, &d));
  WatchForGo();
  if (my_rank >= 3) {
    LoopUntilGo("d", d);
    return 0;
  }
  const int64_t count = 16 << 20;  // 64 MiB of float32
  Tensor big(TUTTI_DTYPE_FLOAT32, count, 4);
  for (int i = 0; !go_seen; ++i) {
    std::string name = "big." + std::to_string(i);
    tutti_request_t request;
    Check("submit big", tutti_allreduce(rt, name.c_str(), s, &big.desc, &big.desc, nullptr, &request));
    Say("big started %d", i);
    tutti_status_t status = tutti_request_wait(request, 120000);
    std::string error = tutti_last_error();
    tutti_request_free(request);
    if (status == TUTTI_OK) {
      Say("big ok %d", i);
      continue;
    }
    Say("big failed %d %s", status, error.c_str());
    status = tutti_allreduce(rt, "after", s, &big.desc, &big.desc, nullptr, &request);
    Say("after %d %s", status, tutti_last_error());
    break;
  }
  while (!go_seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

// Every rank submits a request nobody matches ("submitted"), then the harness kills or restarts
// tuttid: prints "lost <status> <message>" for the pending request, then "after ..." for a new
// submission and "add ..." for a set change.
int CoordinatorLoss() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t request;
  std::string name = "only." + std::to_string(my_rank);
  Check("submit", tutti_allreduce(rt, name.c_str(), TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request));
  Say("submitted");
  tutti_status_t status = tutti_request_wait(request, 60000);
  Say("lost %d %s", status, tutti_last_error());
  tutti_request_free(request);
  status = tutti_allreduce(rt, "after", TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request);
  Say("after %d %s", status, tutti_last_error());
  int32_t pair[] = {0, 1}, id;
  status = tutti_process_set_add(rt, pair, 2, 1000, &id);
  Say("add %d %s", status, tutti_last_error());
  return 0;
}

// World of 3. Rank 1 forks a child that tries the runtime ("child <status> <message>") and then
// lives until 8 s after rank 1 died; rank 1 prints "forked" and idles. Ranks 0 and 2 allreduce on the world
// and print "status ..." when rank 1, killed by the harness, is declared lost.
int ForkThenDie() {
  if (my_rank == 1) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
      close(pipe_fds[1]);
      int32_t value;
      tutti_status_t status = tutti_rank(rt, &value);
      Say("child %d %s", status, tutti_last_error());
      status = tutti_finalize(rt);
      Say("child finalize %d", status);
      char byte;
      while (read(pipe_fds[0], &byte, 1) > 0) {
      }
      // The parent died (its end of the pipe closed). Hold its sockets past tuttid's lease, so
      // that no connection closes and the lease alone can find the parent gone; then go.
      sleep(8);
      _exit(0);
    }
    close(pipe_fds[0]);
    Say("forked");
    AwaitGo();  // the harness kills this process meanwhile
    return 0;
  }
  Tensor t(TUTTI_DTYPE_FLOAT32, 4, 4);
  if (Allreduce("after-fork", TUTTI_WORLD, t) == TUTTI_OK) return Say("fail: rank 1 was expected to die"), 1;
  return 0;
}

// Two ranks start a 64 MiB allreduce ("started"); the harness freezes rank 1 and tells rank 0 to
// finalize with the request in flight: prints "finalized <status> <ms>" and "request <status>
// <message>". Rank 1 never gets further.
int FinalizeInFlight() {
  Tensor big(TUTTI_DTYPE_FLOAT32, 16 << 20, 4);
  tutti_request_t request;
  Check("submit", tutti_allreduce(rt, "big", TUTTI_WORLD, &big.desc, &big.desc, nullptr, &request));
  Say("started");
  AwaitGo();
  auto start = std::chrono::steady_clock::now();
  tutti_status_t status = tutti_finalize(rt);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  rt = nullptr;
  Say("finalized %d %lld", status, static_cast<long long>(ms.count()));
  status = tutti_request_wait(request, 0);
  Say("request %d %s", status, tutti_last_error());
  tutti_request_free(request);
  std::exit(0);  // the runtime is gone: skip main's finalize
}

// Three ranks start a 64 MiB allreduce ("started"); the harness freezes rank 2 and tells rank 0 to
// abort: rank 0 prints "aborted <status> <ms> <message>" (how long its request took to end after
// the call) and "finalized <status>"; rank 1 prints "peer <status> <message>".
int AbortInFlight() {
  Tensor big(TUTTI_DTYPE_FLOAT32, 16 << 20, 4);
  tutti_request_t request;
  Check("submit", tutti_allreduce(rt, "big", TUTTI_WORLD, &big.desc, &big.desc, nullptr, &request));
  Say("started");
  if (my_rank == 0) {
    AwaitGo();
    auto start = std::chrono::steady_clock::now();
    Check("abort", tutti_abort(rt));
    tutti_status_t status = tutti_request_wait(request, -1);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    Say("aborted %d %lld %s", status, static_cast<long long>(ms.count()), tutti_last_error());
    tutti_request_free(request);
    tutti_request_t later;
    status = tutti_barrier(rt, TUTTI_WORLD, &later);
    Say("later %d %s", status, tutti_last_error());
    // Held until rank 1 reported: once this rank exits, its closed connections race the
    // coordinator's word of the abort to rank 1.
    AwaitGo();
    Say("finalized %d", tutti_finalize(rt));
    std::exit(0);
  }
  tutti_status_t status = tutti_request_wait(request, -1);
  Say("peer %d %s", status, tutti_last_error());
  tutti_request_free(request);
  return 0;
}

// Every rank loops world allreduces until "go" ("w <i>"), while the harness throws bad frames.
int Steady() {
  WatchForGo();
  LoopUntilGo("w", TUTTI_WORLD);
  return 0;
}

const ScenarioRegistrar registered = {
    {"big", BigWithBystanders},
    {"coordinator_loss", CoordinatorLoss},
    {"fork", ForkThenDie},
    {"finalize_in_flight", FinalizeInFlight},
    {"abort", AbortInFlight},
    {"steady", Steady},
};

}  // namespace
}  // namespace worker
