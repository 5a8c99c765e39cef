// Scenarios about a process that finalizes and initializes again (docs/lifecycle.md): each init
// after a finalize joins the job's next generation (membership epoch), with its own set ids.
#include <tutti/tutti.h>

#include <cstdlib>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// World of 3, generation 1 with static set {1,2}. Rank 0 finalizes and initializes again (static
// set {0,1}) at once, printing "reinit"; ranks 1 and 2 keep using generation 1 after "go" (their
// set's allreduce: "undisturbed"), then do the same. In generation 2 set 1 is {0,1}:
// "generation 2 ok".
int Reinit() {
  SumOnSet("start", TUTTI_WORLD);
  if (my_rank != 0) {
    AwaitGo();  // the test saw rank 0 register into generation 2
    for (int i = 0; i < 5; ++i) SumOnSet(("undisturbed." + std::to_string(i)).c_str(), 1);
    Say("undisturbed");
  }
  Check("finalize", tutti_finalize(rt));
  ::setenv("TEST_STATIC_SETS", "0,1", 1);
  Say("reinit");
  Init();
  int32_t members[8], n = 0;
  Check("ranks", tutti_process_set_ranks(rt, 1, members, 8, &n));
  if (n != 2 || members[0] != 0 || members[1] != 1) {
    Say("fail: set 1 of generation 2 has %d ranks", n);
    return 1;
  }
  if (my_rank <= 1) SumOnSet("g2.set", 1);
  SumOnSet("g2.world", TUTTI_WORLD);
  Say("generation 2 ok");
  return 0;
}

// World of 2. Rank 0 finalizes and initializes again with a short rendezvous timeout while rank
// 1 stays in generation 1: rank 0's init fails naming rank 1 ("reinit <status> <message>"), then
// it initializes once more and meets rank 1, which came after "go".
int ReinitAlone() {
  SumOnSet("start", TUTTI_WORLD);
  if (my_rank == 0) {
    Check("finalize", tutti_finalize(rt));
    tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
    options.timeout_ms = 1500;
    tutti_status_t status = tutti_init(&options, &rt);
    Say("reinit %d %s", status, tutti_last_error());
    if (status == TUTTI_OK) return 1;
  } else {
    AwaitGo();
    Check("finalize", tutti_finalize(rt));
  }
  Init();
  SumOnSet("together", TUTTI_WORLD);
  Say("together ok");
  return 0;
}

const ScenarioRegistrar registered = {
    {"reinit", Reinit},
    {"reinit_alone", ReinitAlone},
};

}  // namespace
}  // namespace worker
