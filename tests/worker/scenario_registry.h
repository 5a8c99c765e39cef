// The test worker's table of scenarios, name -> function. Each scenario file registers its own
// scenarios with one ScenarioRegistrar at static initialization, so main() (test_worker.cc) looks
// a name up instead of keeping a list, and a new scenario touches only the file of its subject.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace worker {

// The command-line words after the scenario's name.
using ScenarioArgs = std::vector<std::string>;

class Scenario {
 public:
  // A scenario that takes no arguments.
  Scenario(int (*run)()) : run_([run](const ScenarioArgs&) { return run(); }) {}
  // A scenario that reads the words after its name.
  template <typename F,
            std::enable_if_t<std::is_invocable_r_v<int, F&, const ScenarioArgs&>, int> = 0>
  Scenario(F run) : run_(std::move(run)) {}

  // One that calls tutti_init itself (to see it fail): main neither joins the job for it nor
  // finalizes after it.
  static Scenario InitializingItself(int (*run)()) {
    Scenario scenario(run);
    scenario.joins_job_ = false;
    return scenario;
  }

  int Run(const ScenarioArgs& args) const { return run_(args); }
  bool joins_job() const { return joins_job_; }

 private:
  std::function<int(const ScenarioArgs&)> run_;
  bool joins_job_ = true;
};

struct NamedScenario {
  const char* name;
  Scenario scenario;
};

// Adds scenarios to the table; a name registered twice aborts the worker at start-up, since the
// harness could not tell which of the two it ran.
class ScenarioRegistrar {
 public:
  ScenarioRegistrar(std::initializer_list<NamedScenario> scenarios);
};

// The scenario registered as `name`, or nullptr.
const Scenario* FindScenario(const std::string& name);
// Every registered name, sorted.
std::vector<std::string> ScenarioNames();

}  // namespace worker
