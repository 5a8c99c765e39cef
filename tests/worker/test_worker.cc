// A rank for the multi-process tests. Uses tutti.h alone, like any application. The scenario is
// argv[1], looked up in the table the scenario files register into (scenario_registry.h); the
// words after it are the scenario's arguments. The harness reads this program's output lines and,
// where a scenario must wait for the harness, writes lines to its stdin. Every line is flushed at
// once.
//
// Output lines: "ready", "fail <what>: <status> <message>", and scenario-specific lines documented
// with each scenario. Exit status 0 means the scenario's own checks passed; 2, a wrong command line.
#include <tutti/tutti.h>

#include <cstdio>
#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

int main(int argc, char** argv) {
  using namespace worker;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SCENARIO [ARGS...]\n", argv[0]);
    return 2;
  }
  const Scenario* scenario = FindScenario(argv[1]);
  if (!scenario) {
    // Before joining: a misspelt name in a test fails at once instead of holding up the job.
    Say("fail: unknown scenario %s", argv[1]);
    std::string known;
    for (const std::string& name : ScenarioNames()) known += " " + name;
    std::fprintf(stderr, "known scenarios:%s\n", known.c_str());
    return 2;
  }
  const ScenarioArgs args(argv + 2, argv + argc);
  if (!scenario->joins_job()) return scenario->Run(args);
  Init();
  const int result = scenario->Run(args);
  Check("finalize", tutti_finalize(rt));
  return result;
}
