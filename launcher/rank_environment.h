// The environment each rank starts with (docs/launcher.md, "What each rank gets" and "Across
// hosts"): tuttirun's own variables for the rank, on top of tuttirun's environment for a rank on
// this machine, or of the forwarded part of it for a rank on another host. Pure functions over
// tuttirun's environment; main thread only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/hosts.h"
#include "launcher/options.h"

namespace tutti::launcher {

using Variables = std::vector<std::pair<std::string, std::string>>;

// TUTTI_COORDINATOR, _JOB, _TOKEN, _RANK, _SIZE, the elastic settings, horovodrun's HOROVOD_RANK,
// _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE from `placement`, and, when
// `placement.host` is set, TUTTI_HOST_ID and HOROVOD_HOSTNAME naming it.
Variables RankVariables(const Options& opts, const std::string& coordinator,
                        const std::string& token, const Placement& placement);

// A rank on this machine: all of tuttirun's environment, then -x NAME=VALUE, then `ours`, each
// replacing an inherited variable of its name.
std::vector<std::string> LocalEnvironment(const Variables& ours,
                                          const std::vector<std::string>& exports);

// A rank on another host: of tuttirun's environment only what ForwardedByDefault names and what
// -x NAME names, then -x NAME=VALUE, then `ours`. The rest (HOME, USER, SSH_*, DISPLAY, ...) is
// the remote login's own.
std::vector<std::string> RemoteEnvironment(const Variables& ours,
                                           const std::vector<std::string>& exports);

}  // namespace tutti::launcher
