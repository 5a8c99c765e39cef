#include "launcher/rank_environment.h"

#include <algorithm>
#include <string_view>

#include "launcher/ssh_command.h"

extern char** environ;

namespace tutti::launcher {
namespace {

// Sets `name` in `env` ("KEY=VALUE" entries), in place when it is already there.
void Set(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  auto it = std::find_if(env.begin(), env.end(), [&](const std::string& kv) {
    return kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 &&
           kv[name.size()] == '=';
  });
  if (it != env.end()) *it = name + "=" + value;
  else env.push_back(name + "=" + value);
}

std::vector<std::string> Environment(bool remote, const Variables& ours,
                                     const std::vector<std::string>& exports) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    const bool exported = std::find(exports.begin(), exports.end(), name) != exports.end();
    if (!remote || ForwardedByDefault(name) || exported) env.emplace_back(kv);
  }
  for (const std::string& e : exports) {
    const auto eq = e.find('=');
    if (eq != std::string::npos) Set(env, e.substr(0, eq), e.substr(eq + 1));
  }
  for (const auto& [name, value] : ours) Set(env, name, value);
  return env;
}

}  // namespace

Variables RankVariables(const Options& opts, const std::string& coordinator,
                        const std::string& token, const Placement& placement) {
  const std::string size = std::to_string(opts.np);
  Variables ours = {{"TUTTI_COORDINATOR", coordinator},
                    {"TUTTI_JOB", opts.job},
                    {"TUTTI_TOKEN", token},
                    {"TUTTI_RANK", std::to_string(placement.rank)},
                    {"TUTTI_SIZE", size},
                    // horovodrun's names, for Horovod scripts and tests that read them.
                    {"HOROVOD_RANK", std::to_string(placement.rank)},
                    {"HOROVOD_SIZE", size},
                    {"HOROVOD_LOCAL_RANK", std::to_string(placement.local_rank)},
                    {"HOROVOD_LOCAL_SIZE", std::to_string(placement.local_size)},
                    {"HOROVOD_CROSS_RANK", std::to_string(placement.cross_rank)},
                    {"HOROVOD_CROSS_SIZE", std::to_string(placement.cross_size)}};
  if (opts.min_np > 0) {
    ours.insert(ours.end(), {{"TUTTI_ELASTIC", "1"},
                             {"TUTTI_MIN_SIZE", std::to_string(opts.min_np)},
                             {"TUTTI_ELASTIC_TIMEOUT", std::to_string(opts.elastic_timeout_s)}});
  }
  if (opts.max_np > 0) ours.emplace_back("TUTTI_MAX_SIZE", std::to_string(opts.max_np));
  if (!placement.host.empty()) {
    ours.emplace_back("TUTTI_HOST_ID", placement.host);
    ours.emplace_back("HOROVOD_HOSTNAME", placement.host);
  }
  return ours;
}

std::vector<std::string> LocalEnvironment(const Variables& ours,
                                          const std::vector<std::string>& exports) {
  return Environment(/*remote=*/false, ours, exports);
}

std::vector<std::string> RemoteEnvironment(const Variables& ours,
                                           const std::vector<std::string>& exports) {
  return Environment(/*remote=*/true, ours, exports);
}

}  // namespace tutti::launcher
