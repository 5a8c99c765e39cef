#include "launcher/host_discovery.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "launcher/rank_process.h"

extern char** environ;

namespace tutti::launcher {
namespace {

std::string Trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

bool ParseLine(const std::string& line, int default_slots, DiscoveredHost* host) {
  const auto colon = line.rfind(':');
  // "::1" and other IPv6 addresses without slots have more than one colon.
  if (colon == std::string::npos || line.find(':') != colon) {
    *host = {line, default_slots};
    return !line.empty();
  }
  const std::string slots = line.substr(colon + 1);
  if (slots.empty() || slots.size() > 6 ||
      !std::all_of(slots.begin(), slots.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *host = {line.substr(0, colon), std::stoi(slots)};
  return !host->name.empty() && host->slots > 0;
}

}  // namespace

bool DiscoverHosts(const std::string& script, int default_slots, std::chrono::milliseconds timeout,
                   std::vector<DiscoveredHost>* hosts, std::string* error) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  RankProcess process(-1);
  try {
    process.Start({"/bin/sh", "-c", script}, env);
  } catch (const std::exception& e) {
    *error = std::string("cannot run the host discovery script: ") + e.what();
    return false;
  }
  std::vector<std::string> lines, errors;
  const RankProcess::LineSink sink = [&](int, Stream s, std::string_view line) {
    (s == Stream::kOut ? lines : errors).emplace_back(line);
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process.streams_open() && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<Stream> streams;
    for (Stream s : {Stream::kOut, Stream::kErr}) {
      if (process.fd(s) < 0) continue;
      fds.push_back({process.fd(s), POLLIN, 0});
      streams.push_back(s);
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left.count(), 0))) < 0)
      continue;  // EINTR: tuttirun's own signals
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) process.ReadAvailable(streams[i], sink);
  }
  if (process.streams_open()) {
    process.Signal(SIGKILL);
    process.Reap();
    *error = "the host discovery script ran longer than " +
             std::to_string(timeout.count() / 1000) + " s";
    return false;
  }
  process.Reap();
  const int status = process.wait_status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "the host discovery script failed (" +
             (WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status))) +
             ")" + (errors.empty() ? "" : ": " + errors.back());
    return false;
  }
  hosts->clear();
  for (const std::string& raw : lines) {
    const std::string line = Trim(raw);
    if (line.empty()) continue;
    DiscoveredHost host;
    if (!ParseLine(line, default_slots, &host)) {
      *error = "the host discovery script printed '" + line + "': expected HOST or HOST:SLOTS";
      return false;
    }
    auto known = std::find_if(hosts->begin(), hosts->end(),
                              [&](const DiscoveredHost& h) { return h.name == host.name; });
    if (known != hosts->end()) known->slots = host.slots;  // the last line for a host wins
    else hosts->push_back(host);
  }
  return true;
}

bool IsThisMachine(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return false;
  const std::string self(name);
  return host == self || host == self.substr(0, self.find('.'));
}

std::string HostBlacklist::Add(const std::string& host, Clock::time_point now) {
  Entry& entry = hosts_[host];
  ++entry.times;
  if (min_s_ <= 0) {
    entry.forever = true;
    return "for the rest of the job (--blacklist-cooldown-range gives it a cool-down)";
  }
  const double seconds = std::min(max_s_, min_s_ * std::pow(2.0, entry.times - 1));
  entry.until = now + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(seconds));
  char text[64];
  std::snprintf(text, sizeof text, "for %g s", seconds);
  return text;
}

bool HostBlacklist::Blocked(const std::string& host, Clock::time_point now) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return false;
  return it->second.forever || now < it->second.until;
}

}  // namespace tutti::launcher
