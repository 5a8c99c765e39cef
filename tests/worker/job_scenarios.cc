// Scenarios about joining a job: the topology a rank sees and an init that must fail. Many test
// files start these (allreduce, process sets, jobs, security, network namespaces, transports).
#include <tutti/tutti.h>

#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Expects init to fail; prints "init <status> <message>".
int InitError() {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_status_t status = tutti_init(&options, &rt);
  Say("init %d %s", status, tutti_last_error());
  if (status == TUTTI_OK) tutti_finalize(rt);
  return 0;
}

// Prints "world <rank> <size> <local_rank> <local_size> <cross_rank> <cross_size>", then allreduces.
int Basic() {
  int32_t values[4];
  Check("local_rank", tutti_local_rank(rt, &values[0]));
  Check("local_size", tutti_local_size(rt, &values[1]));
  Check("cross_rank", tutti_cross_rank(rt, &values[2]));
  Check("cross_size", tutti_cross_size(rt, &values[3]));
  Say("world %d %d %d %d %d %d", my_rank, world_size, values[0], values[1], values[2], values[3]);
  for (int i = 0; i < 10; ++i) SumOnSet(("basic." + std::to_string(i)).c_str(), TUTTI_WORLD, 10000);
  Say("basic ok");
  return 0;
}

const ScenarioRegistrar registered = {
    {"init_error", Scenario::InitializingItself(InitError)},
    {"basic", Basic},
};

}  // namespace
}  // namespace worker
