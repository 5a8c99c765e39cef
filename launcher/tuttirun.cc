// tuttirun: starts N ranks of a program, here or across hosts over ssh, wires them to a
// coordinator (embedded unless one is given), prefixes their output with the rank, and tears the
// whole job down as soon as one rank fails (an elastic job, --min-np, goes on without it). See
// docs/launcher.md. Here: the job's plan (where each rank runs, the ssh check, where the
// coordinator listens), signals, and starting the ranks; options.cc parses the command line,
// rank_environment.cc and ssh_command.cc say what a rank is started with, supervisor.cc watches
// the ranks, output.cc writes what tuttirun says and forwards.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "launcher/coordinator_address.h"
#include "launcher/cpu_binding.h"
#include "launcher/embedded_coordinator.h"
#include "launcher/host_discovery.h"
#include "launcher/hosts.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/rank_environment.h"
#include "launcher/rank_process.h"
#include "launcher/ssh_check.h"
#include "launcher/ssh_command.h"
#include "launcher/supervisor.h"

extern char** environ;

namespace {

using namespace tutti::launcher;

// Written by signal handlers, read by the main loop: signals become poll() events, so the loop
// has a single place where it waits and no race between checking a flag and sleeping.
int g_wake_write_fd = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!::write(g_wake_write_fd, &b, 1);  // a full pipe already guarantees a wakeup
  errno = saved;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(bytes))) {
    std::random_device rd;
    for (auto& b : raw) b = static_cast<unsigned char>(rd());
  }
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

void InstallSignalHandlers(int wake_write_fd) {
  g_wake_write_fd = wake_write_fd;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &sa, nullptr);
  // A closed stdout must not kill tuttirun while it still has ranks to reap.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, nullptr);
}

// Where the ranks run: `remote` holds the hosts other than this machine, in order, and
// `local_index` numbers the ranks started here, for --bind-to.
struct Plan {
  std::vector<Placement> placements;
  std::vector<std::string> remote;
  std::map<int, int> local_index;
};

Plan MakePlan(const Options& opts) {
  Plan plan;
  // Without hosts every rank is here, with horovodrun's single-host numbering and no host id.
  plan.placements = PlaceRanks(opts.hosts.empty() ? std::vector<HostSlots>{{"", opts.np}}
                                                  : opts.hosts,
                               opts.np);
  for (const Placement& p : plan.placements) {
    if (p.host.empty() || IsThisMachine(p.host)) {
      const int next = static_cast<int>(plan.local_index.size());
      plan.local_index[p.rank] = next;
    } else if (plan.remote.empty() || plan.remote.back() != p.host) {
      plan.remote.push_back(p.host);
    }
  }
  return plan;
}

int Main(int argc, char** argv) {
  Options opts;
  if (auto code = ParseOptions(argc, argv, opts)) return *code;

  const std::string token = RandomHex(16);
  if (opts.job.empty()) opts.job = "tuttirun-" + RandomHex(8);
  SetLinePrefixes(!opts.no_prefix);
  const Plan plan = MakePlan(opts);
  const bool across_hosts = !plan.remote.empty();

  // Bound before anything starts, so that a binding that cannot be met is a usage error.
  std::string binding_problem;
  const bool discovery = !opts.discovery_script.empty();
  const auto binding = CpuBinding::Make(
      discovery && opts.bind_to == "auto" ? "none" : opts.bind_to,
      discovery ? opts.max_np : static_cast<int>(plan.local_index.size()), AllowedCpus(),
      &binding_problem);
  if (!binding) {
    Say(binding_problem);
    return kUsageError;
  }

  std::string advertised;  // the address remote ranks reach the embedded coordinator at
  std::string cwd;
  if (across_hosts) {
    std::string error;
    if (opts.coordinator.empty() &&
        (advertised = AdvertisedAddress(opts.network_interface, plan.remote[0], &error)).empty()) {
      Say(error);
      return 1;
    }
    std::error_code ec;
    cwd = std::filesystem::current_path(ec).string();
    if (ec) {
      Say("cannot tell the current directory, which remote ranks start in: " + ec.message());
      return 1;
    }
    const auto unreachable =
        CheckReachable(opts.ssh, plan.remote, std::chrono::seconds(opts.start_timeout_s));
    for (const UnreachableHost& u : unreachable)
      Say("cannot reach host '" + u.host + "' over ssh: " + u.reason);
    if (!unreachable.empty()) return 1;
  }

  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    Say(std::string("pipe: ") + std::strerror(errno));
    return 1;
  }
  InstallSignalHandlers(wake[1]);

  // Declared before the ranks so that it outlives them on every path.
  std::unique_ptr<EmbeddedCoordinator> embedded;
  std::string coordinator = opts.coordinator;
  if (coordinator.empty()) {
    // spdlog's default logger writes to stdout, which belongs to the ranks' output.
    auto logger = spdlog::stderr_color_mt("coordinator");
    logger->set_pattern("tuttirun: coordinator %l: %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(opts.log_level));
    try {
      tutti::server::CoordinatorOptions options;
      options.timeline = opts.coordinator_timeline;
      // Remote ranks must reach it; a job on this machine alone stays unreachable from others.
      if (across_hosts) options.bind = "tcp://0.0.0.0:*";
      embedded = std::make_unique<EmbeddedCoordinator>(options);
    } catch (const std::exception& e) {
      Say(std::string("cannot start the embedded coordinator: ") + e.what());
      return 1;
    }
    coordinator = across_hosts ? AdvertisedEndpoint(embedded->endpoint(), advertised)
                               : embedded->endpoint();
    if (opts.verbose)
      Say("coordinator listening on " + embedded->endpoint() + ", given to the ranks as " +
          coordinator);
  }

  std::vector<std::string> ssh_environment;
  for (char** e = environ; *e; ++e) ssh_environment.emplace_back(*e);
  const auto start_rank = [&](RankProcess& process, const Placement& placement) {
    const Variables ours = RankVariables(opts, coordinator, token, placement);
    const auto local = plan.local_index.find(placement.rank);
    if (!discovery && local == plan.local_index.end()) {
      const std::vector<std::string> ssh = SshArgv(
          opts.ssh, placement.host,
          RemoteRankCommand(cwd, placement.host, RemoteEnvironment(ours, opts.exports),
                            opts.command));
      if (opts.verbose) {
        std::string line;
        for (const std::string& word : ssh) line += (line.empty() ? "" : " ") + ShellQuote(word);
        Say("rank " + std::to_string(placement.rank) + " on host '" + placement.host +
            "': " + line);
      }
      if (opts.report_bindings)
        Say("rank " + std::to_string(placement.rank) + " is not bound (host '" + placement.host +
            "')");
      process.StartRemote(ssh, ssh_environment);
      return;
    }
    const int index = discovery ? placement.rank : local->second;
    if (opts.report_bindings)
      Say("rank " + std::to_string(placement.rank) +
          (binding->bound() ? " bound to " + binding->Describe(index) : " is not bound"));
    process.Start(opts.command, LocalEnvironment(ours, opts.exports), binding->For(index));
  };

  std::vector<std::unique_ptr<RankProcess>> ranks;
  if (discovery) {
    Scaler::Settings settings;
    settings.script = opts.discovery_script;
    settings.slots_per_host = opts.slots_per_host;
    settings.max_np = opts.max_np;
    if (opts.blacklist_cooldown.size() == 2) {
      settings.cooldown_min_s = opts.blacklist_cooldown[0];
      settings.cooldown_max_s = opts.blacklist_cooldown[1];
    }
    Scaler scaler(settings, [&](int rank, const std::string& host) {
      auto process = std::make_unique<RankProcess>(rank, host);
      // Discovered ranks run here; their numbering is that of one host holding the job.
      Placement placement;
      placement.host = host;
      placement.rank = placement.local_rank = rank;
      placement.local_size = opts.np;
      placement.cross_size = 1;
      start_rank(*process, placement);
      return process;
    });
    std::string error;
    if (!scaler.WaitForSlots(opts.min_np,
                             std::chrono::milliseconds(
                                 static_cast<int64_t>(opts.elastic_timeout_s * 1000)),
                             &error)) {
      Say(error);
      return 1;
    }
    opts.np = scaler.InitialSize(opts.np);  // the job's first size: TUTTI_SIZE of every rank
    Supervisor supervisor(ranks, wake[0], /*elastic=*/true, opts.reset_limit, &scaler);
    scaler.Fill(ranks, opts.np);
    if (static_cast<int>(ranks.size()) < opts.np) supervisor.BeginStop(1, SIGTERM);
    return supervisor.Run();
  }
  Supervisor supervisor(ranks, wake[0], opts.min_np > 0, opts.reset_limit);
  for (const Placement& placement : plan.placements) {
    auto process = std::make_unique<RankProcess>(placement.rank, placement.host);
    try {
      start_rank(*process, placement);
    } catch (const std::exception& e) {
      Say("cannot start rank " + std::to_string(placement.rank) + ": " + e.what());
      supervisor.BeginStop(1, SIGTERM);
      break;
    }
    ranks.push_back(std::move(process));
  }
  return supervisor.Run();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    // Unwinding has killed and reaped the ranks and stopped the coordinator by now.
    Say(std::string("fatal: ") + e.what());
    return 1;
  }
}
