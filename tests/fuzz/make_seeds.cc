// Writes the seed corpora of the fuzz targets: real frames, filled and encoded the way the client
// runtime fills and encodes them (client/runtime.cc, client/control/coordinator_link.cc,
// client/control/announce_cache.cc), in sequences that make a real CoordinatorCore go somewhere: a
// rendezvous, collectives of every kind, process sets, fusion, the response cache, joins, faults.
//
//   make_seeds FRAMES_DIR SEQUENCES_DIR
//
// FRAMES_DIR gets every distinct frame alone (fuzz_client_frame), SEQUENCES_DIR one file per
// scenario in the record format of fuzz_records.h (fuzz_coordinator_core).
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "seed_scenario.h"

namespace {

using tutti::fuzz_seeds::NamedScenarios;
using tutti::fuzz_seeds::Scenario;

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// Every scenario of both subjects.
NamedScenarios AllScenarios() {
  NamedScenarios all = tutti::fuzz_seeds::CollectiveScenarios();
  for (auto& scenario : tutti::fuzz_seeds::MembershipAndFaultScenarios())
    all.push_back(std::move(scenario));
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FRAMES_DIR SEQUENCES_DIR\n", argv[0]);
    return 2;
  }
  const std::string frames_dir = argv[1], sequences_dir = argv[2];
  const NamedScenarios scenarios = AllScenarios();
  std::set<std::string> frames;
  for (const auto& [name, build] : scenarios) {
    Scenario scenario(&frames);
    build(scenario);
    if (!WriteFile(sequences_dir + "/" + name, scenario.input())) return 1;
  }
  int index = 0;
  for (const std::string& frame : frames) {
    char name[32];
    snprintf(name, sizeof(name), "/frame-%03d", index++);
    if (!WriteFile(frames_dir + name, frame)) return 1;
  }
  printf("make_seeds: %zu sequences in %s, %zu frames in %s\n", scenarios.size(),
         sequences_dir.c_str(), frames.size(), frames_dir.c_str());
  return 0;
}
