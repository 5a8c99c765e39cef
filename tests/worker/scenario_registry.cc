// The scenario table behind scenario_registry.h.
#include "worker/scenario_registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace worker {
namespace {

// Built on first use: the registrars of other files run in an unspecified order, possibly before
// a namespace-scope map here would be constructed.
std::map<std::string, Scenario>& Table() {
  static std::map<std::string, Scenario> table;
  return table;
}

}  // namespace

ScenarioRegistrar::ScenarioRegistrar(std::initializer_list<NamedScenario> scenarios) {
  for (const NamedScenario& entry : scenarios)
    if (!Table().emplace(entry.name, entry.scenario).second) {
      std::fprintf(stderr, "test worker: scenario '%s' is registered twice\n", entry.name);
      std::abort();
    }
}

const Scenario* FindScenario(const std::string& name) {
  auto found = Table().find(name);
  return found == Table().end() ? nullptr : &found->second;
}

std::vector<std::string> ScenarioNames() {
  std::vector<std::string> names;
  for (const auto& [name, scenario] : Table()) names.push_back(name);
  return names;
}

}  // namespace worker
