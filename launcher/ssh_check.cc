#include "launcher/ssh_check.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <memory>

#include "launcher/rank_process.h"

extern char** environ;

namespace tutti::launcher {

std::vector<UnreachableHost> CheckReachable(const SshSettings& settings,
                                            const std::vector<std::string>& hosts,
                                            std::chrono::seconds timeout) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  SshSettings check = settings;
  // After the user's own options, so that theirs win as they do for the ranks' ssh.
  check.options.push_back("ConnectTimeout=" + std::to_string(timeout.count()));

  // RankProcess gives each ssh its pipes and reaps it on every path; the index is the host's.
  std::vector<std::unique_ptr<RankProcess>> checks;
  std::vector<std::string> last_error(hosts.size());
  std::vector<UnreachableHost> unreachable;
  for (size_t i = 0; i < hosts.size(); ++i) {
    checks.push_back(std::make_unique<RankProcess>(static_cast<int>(i), hosts[i]));
    try {
      checks.back()->Start(SshArgv(check, hosts[i], "true"), env);
    } catch (const std::exception& e) {
      last_error[i] = std::string("cannot run ssh: ") + e.what();
    }
  }
  const RankProcess::LineSink sink = [&](int index, Stream s, std::string_view line) {
    if (s == Stream::kErr && line.find_first_not_of(" \t\r") != std::string_view::npos)
      last_error[index] = std::string(line);
  };
  const auto deadline = Clock::now() + timeout;
  const auto open = [&] {
    return std::any_of(checks.begin(), checks.end(),
                       [](const auto& c) { return c->streams_open(); });
  };
  while (open() && Clock::now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<std::pair<RankProcess*, Stream>> owners;
    for (auto& c : checks) {
      for (Stream s : {Stream::kOut, Stream::kErr}) {
        if (c->fd(s) < 0) continue;
        fds.push_back({c->fd(s), POLLIN, 0});
        owners.emplace_back(c.get(), s);
      }
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left.count(), 0))) < 0)
      continue;  // EINTR
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) owners[k].first->ReadAvailable(owners[k].second, sink);
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    RankProcess& c = *checks[i];
    if (c.pid() < 0) {
      unreachable.push_back({hosts[i], last_error[i]});
      continue;
    }
    if (c.streams_open()) {
      c.Signal(SIGKILL);
      c.Reap();
      unreachable.push_back(
          {hosts[i], "no answer within " + std::to_string(timeout.count()) +
                         " s (--start-timeout)"});
      continue;
    }
    c.Reap();
    const int status = c.wait_status();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    // ssh says why on stderr; a silent failure is described by its status.
    std::string reason = last_error[i];
    if (reason.empty() && WIFEXITED(status))
      reason = "ssh exited with status " + std::to_string(WEXITSTATUS(status));
    else if (reason.empty())
      reason = "ssh was killed by signal " + std::to_string(WTERMSIG(status));
    unreachable.push_back({hosts[i], reason});
  }
  return unreachable;
}

}  // namespace tutti::launcher
