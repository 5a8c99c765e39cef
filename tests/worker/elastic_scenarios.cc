// Scenarios of elastic jobs through the C ABI (docs/elastic.md): a lost rank re-forms the job,
// the survivors are renumbered, sets that lost it fail once and go on without it, sets that did
// not are untouched, and tutti_await_membership_epoch acknowledges the change.
#include <tutti/tutti.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// An allreduce of one float32 on `set`; prints "fail ..." and exits on an unexpected status.
tutti_status_t SumOne(const std::string& name, int32_t set, float value, float* sum) {
  Tensor t(TUTTI_DTYPE_FLOAT32, 1, 4);
  t.as<float>()[0] = value;
  tutti_status_t status = Allreduce(name.c_str(), set, t);
  *sum = t.as<float>()[0];
  return status;
}

int32_t Rank() {
  int32_t rank = -1;
  Check("rank", tutti_rank(rt, &rank));
  return rank;
}

// World of 3 with static sets 1 = {1, 2} and 2 = {0, 2}. Each rank prints "ready"; the harness
// kills rank 1. Ranks 0 and 2 run world allreduces until one fails ("lost <status> <message>"),
// then, before acknowledging: set 2 (rank 1 was not in it) still runs ("set 2 sum <x>"), the world
// refuses new work ("world before ack <status> <message>"). After tutti_await_membership_epoch:
// "epoch <e> rank <r> size <n>", the sets' new members, a world sum and a broadcast from rank 1
// (the old rank 2): "elastic ok".
int ElasticLoss() {
  float sum = 0;
  Check("warm", SumOne("warm", TUTTI_WORLD, 1, &sum));
  uint64_t epoch = 0;
  Check("epoch", tutti_membership_epoch(rt, &epoch));
  Say("ready %llu", static_cast<unsigned long long>(epoch));
  if (my_rank == 1) {
    AwaitGo();  // killed meanwhile
    return 1;
  }
  tutti_status_t status = TUTTI_OK;
  for (int i = 0; status == TUTTI_OK; ++i)
    status = SumOne("tick." + std::to_string(i), TUTTI_WORLD, 1, &sum);
  Say("lost %d %s", status, last_failure.c_str());
  status = SumOne("on-set-2", 2, static_cast<float>(my_rank), &sum);
  if (status != TUTTI_OK) return Say("fail: set 2 %d %s", status, last_failure.c_str()), 1;
  Say("set 2 sum %g", sum);
  status = SumOne("world-before-ack", TUTTI_WORLD, 1, &sum);
  Say("world before ack %d %s", status, last_failure.c_str());
  Check("await", tutti_await_membership_epoch(rt, epoch, 30000, &epoch));
  int32_t size = 0;
  Check("size", tutti_size(rt, &size));
  Say("epoch %llu rank %d size %d", static_cast<unsigned long long>(epoch), Rank(), size);
  for (int32_t set : {1, 2}) {
    int32_t members[8], n = 0;
    Check("ranks", tutti_process_set_ranks(rt, set, members, 8, &n));
    std::string list;
    for (int32_t i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(members[i]);
    Say("set %d = [%s]", set, list.c_str());
  }
  Check("world", SumOne("world-after", TUTTI_WORLD, static_cast<float>(Rank() + 1), &sum));
  if (sum != 3) return Say("fail: world sum %g", sum), 1;
  Tensor b(TUTTI_DTYPE_INT32, 1, 4);
  b.as<int32_t>()[0] = Rank() == 1 ? 42 : 0;
  tutti_request_t request = nullptr;
  Check("broadcast", tutti_broadcast(rt, "from-1", TUTTI_WORLD, &b.desc, 1, &request));
  Check("wait", tutti_request_wait(request, -1));
  tutti_request_free(request);
  if (b.as<int32_t>()[0] != 42) return Say("fail: broadcast gave %d", b.as<int32_t>()[0]), 1;
  Say("elastic ok");
  return 0;
}

// A rank added to a running job of 2 with static set 1 = {1} (docs/elastic.md, "Adding
// ranks"). Ranks 0 and 1 print "ready", wait until tutti_ranks_waiting says a rank waits
// ("waiting <n>"), and call tutti_await_membership_epoch at that boundary. The harness starts the
// added rank (TUTTI_RANK=2, TEST_ADDED=1), whose init returns once it is admitted. Then every
// rank prints "grown <epoch> rank <r> size <n>", reduces over the grown world, receives a
// broadcast from the added rank, and rank 1 reduces on set 1, which did not change:
// "grow ok".
int ElasticGrow() {
  float sum = 0;
  uint64_t epoch = 0;
  const bool added = std::getenv("TEST_ADDED") != nullptr;
  if (!added) {
    Check("warm", SumOne("warm", TUTTI_WORLD, 1, &sum));
    Check("epoch", tutti_membership_epoch(rt, &epoch));
    Say("ready %llu", static_cast<unsigned long long>(epoch));
    int32_t waiting = 0;
    for (int i = 0; i < 60000 && waiting == 0; ++i) {
      Check("ranks_waiting", tutti_ranks_waiting(rt, &waiting));
      if (waiting == 0) usleep(1000);  // polling the runtime's state for the joiner's arrival
    }
    Say("waiting %d", waiting);
    Check("await", tutti_await_membership_epoch(rt, epoch, 30000, &epoch));
  }
  Check("epoch", tutti_membership_epoch(rt, &epoch));
  int32_t size = 0;
  Check("size", tutti_size(rt, &size));
  Say("grown %llu rank %d size %d", static_cast<unsigned long long>(epoch), Rank(), size);
  // Before the world collectives: once they complete, a rank that finished may leave (an orderly
  // leave re-forms the job and renumbers everyone).
  int32_t members[4], n = 0;
  Check("ranks", tutti_process_set_ranks(rt, 1, members, 4, &n));
  if (n != 1 || members[0] != 1) return Say("fail: set 1 changed: %d members, first %d", n, members[0]), 1;
  if (Rank() == 1) {
    Check("set 1", SumOne("set-1", 1, 1, &sum));
    if (sum != 1) return Say("fail: set 1 sum %g", sum), 1;
  }
  const int32_t rank = Rank();
  Check("world", SumOne("world-grown", TUTTI_WORLD, static_cast<float>(rank + 1), &sum));
  if (sum != 6) return Say("fail: world sum %g", sum), 1;
  Tensor b(TUTTI_DTYPE_INT32, 1, 4);
  b.as<int32_t>()[0] = rank == 2 ? 42 : 0;
  tutti_request_t request = nullptr;
  Check("broadcast", tutti_broadcast(rt, "from-added", TUTTI_WORLD, &b.desc, 2, &request));
  Check("wait", tutti_request_wait(request, -1));
  tutti_request_free(request);
  if (b.as<int32_t>()[0] != 42) return Say("fail: broadcast gave %d", b.as<int32_t>()[0]), 1;
  Say("grow ok");
  return 0;
}

const ScenarioRegistrar registered = {
    {"elastic_loss", ElasticLoss},
    {"elastic_grow", ElasticGrow},
};

}  // namespace
}  // namespace worker
