// tuttirun's up-front ssh check (docs/launcher.md, "Across hosts"), as horovodrun makes it: before
// any rank starts, `ssh HOST true` runs for every remote host at once, so that a host that cannot
// be reached fails the job in seconds with ssh's own reason, instead of as a rank that dies while
// the others wait for it. Main thread only; every ssh it starts is reaped before it returns.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/ssh_command.h"

namespace tutti::launcher {

struct UnreachableHost {
  std::string host;
  // ssh's last line on stderr ("ssh: connect to host h2 port 22: Connection refused"), or what
  // tuttirun saw instead ("no answer within 30 s (--start-timeout)").
  std::string reason;
};

// Runs the check for `hosts` in parallel, each ssh given `timeout` to connect and answer (ssh's
// ConnectTimeout as well), and returns the hosts that failed, in the order of `hosts`.
std::vector<UnreachableHost> CheckReachable(const SshSettings& settings,
                                            const std::vector<std::string>& hosts,
                                            std::chrono::seconds timeout);

}  // namespace tutti::launcher
