#include "launcher/cpu_binding.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

namespace tutti::launcher {
namespace {

// A topology number of `cpu` from sysfs; -1 where the kernel does not say (then every CPU counts
// as a core and a socket of its own, which binds no worse than not binding).
int TopologyId(int cpu, const char* file) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + file);
  int id = -1;
  if (!(in >> id)) return -1;
  return id;
}

std::string Join(const std::vector<int>& cpus) {
  std::string out;
  for (int cpu : cpus) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  return out;
}

}  // namespace

cpu_set_t AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &set);
  return set;
}

std::optional<CpuBinding> CpuBinding::Make(const std::string& policy, int max_local_ranks,
                                           const cpu_set_t& allowed, std::string* problem) {
  CpuBinding binding;
  if (policy == "none") return binding;
  const std::string kind = policy == "auto" ? "core" : policy;
  // Group the allowed CPUs into units: a (socket, core) pair, a socket, or the CPU itself.
  struct Group {
    int id;
    std::vector<int> cpus;
  };
  std::map<std::pair<int, int>, Group> groups;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const int socket = TopologyId(cpu, "physical_package_id");
    const int core = TopologyId(cpu, "core_id");
    std::pair<int, int> key{-1, cpu};
    int id = cpu;
    if (kind == "core" && core >= 0) key = {socket, core}, id = core;
    if (kind == "socket" && socket >= 0) key = {socket, -1}, id = socket;
    Group& group = groups.try_emplace(key, Group{id, {}}).first->second;
    group.cpus.push_back(cpu);
  }
  for (auto& [key, group] : groups) {
    Unit unit{group.id, {}, std::move(group.cpus)};
    CPU_ZERO(&unit.cpus);
    for (int cpu : unit.list) CPU_SET(cpu, &unit.cpus);
    binding.units_.push_back(std::move(unit));
  }
  std::sort(binding.units_.begin(), binding.units_.end(),
            [](const Unit& a, const Unit& b) { return a.list.front() < b.list.front(); });
  binding.kind_ = kind;
  const int units = static_cast<int>(binding.units_.size());
  // Ranks may share a socket; a core or a hardware thread is one rank's alone, as in mpirun.
  if (kind == "socket") return binding;
  if (max_local_ranks > 0 && max_local_ranks <= units) return binding;
  if (policy == "auto") return CpuBinding{};
  *problem = "--bind-to " + kind + ": " +
             (max_local_ranks > 0 ? std::to_string(max_local_ranks) + " local ranks"
                                  : std::string("an elastic job without --max-np")) +
             " but only " + std::to_string(units) + " " + kind + (units == 1 ? "" : "s") +
             " available to tuttirun; give --bind-to none" +
             (max_local_ranks > 0 ? " or fewer ranks" : " or --max-np");
  return std::nullopt;
}

const cpu_set_t* CpuBinding::For(int rank) const {
  if (units_.empty()) return nullptr;
  return &units_[static_cast<size_t>(rank) % units_.size()].cpus;
}

std::string CpuBinding::Describe(int rank) const {
  if (units_.empty()) return "not bound";
  const Unit& unit = units_[static_cast<size_t>(rank) % units_.size()];
  return kind_ + " " + std::to_string(unit.id) + " (CPU" + (unit.list.size() == 1 ? " " : "s ") +
         Join(unit.list) + ")";
}

}  // namespace tutti::launcher
