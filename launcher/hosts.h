// The hosts of a tuttirun job across hosts (docs/launcher.md, "Across hosts"): parsing
// horovodrun's `-H host1:2,host2:2` and `--hostfile` (`host slots=N` lines), and placing ranks on
// the hosts' slots in order, as horovodrun does: host1 gets ranks 0 and 1, host2 ranks 2 and 3.
// Pure functions over values; main thread only, like the rest of tuttirun.
#pragma once

#include <string>
#include <vector>

namespace tutti::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// "host1:2,host2:2" (a host without ":N" has 1 slot, as with mpirun -H). False with `*error` set
// for an empty entry, a bad slot count, a name that is not a host name, or a host listed twice.
bool ParseHostList(const std::string& text, std::vector<HostSlots>* hosts, std::string* error);

// The text of a hostfile: one host per line, "host slots=N" (horovodrun's and mpirun's form),
// "host:N" or "host" (1 slot); blank lines and everything from '#' on are ignored. `source`
// names the file in errors ("hosts.txt:3: ...").
bool ParseHostfileText(const std::string& text, const std::string& source,
                       std::vector<HostSlots>* hosts, std::string* error);
// Reads and parses the file at `path`.
bool ParseHostfile(const std::string& path, std::vector<HostSlots>* hosts, std::string* error);

int TotalSlots(const std::vector<HostSlots>& hosts);

// Where one rank runs, with horovodrun's numbering: `local_rank` among the ranks of its host,
// `cross_rank` among the hosts that have a rank with this local rank, `cross_size` how many
// hosts have one.
struct Placement {
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;
};

// Ranks 0..np-1 filling the hosts' slots in order; `np` must not exceed TotalSlots(hosts). A host
// whose slots are not reached gets no rank.
std::vector<Placement> PlaceRanks(const std::vector<HostSlots>& hosts, int np);

}  // namespace tutti::launcher
