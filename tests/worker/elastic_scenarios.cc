// Scenarios of elastic jobs through the C ABI (docs/elastic.md): a lost rank re-forms the job,
// the survivors are renumbered, sets that lost it fail once and go on without it, sets that did
// not are untouched, and tutti_await_membership_epoch acknowledges the change.
#include <tutti/tutti.h>

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

const ScenarioRegistrar registered = {
    {"elastic_loss", ElasticLoss},
};

}  // namespace
}  // namespace worker
