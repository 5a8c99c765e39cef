// tuttirun: starts N local ranks of a program, wires them to a coordinator (embedded unless one
// is given), prefixes their output with the rank, and tears the whole job down as soon as one
// rank fails (an elastic job, --min-np, goes on without it). See docs/launcher.md. Here: options,
// the ranks' environment, the embedded coordinator, signals; supervisor.cc watches the ranks,
// output.cc writes what tuttirun says and forwards.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "launcher/cpu_binding.h"
#include "launcher/embedded_coordinator.h"
#include "launcher/output.h"
#include "launcher/rank_process.h"
#include "launcher/supervisor.h"

extern char** environ;

namespace {

using tutti::launcher::EmbeddedCoordinator;
using tutti::launcher::RankProcess;
using tutti::launcher::Say;
using tutti::launcher::Supervisor;

constexpr int kUsageError = 2;

struct Options {
  int np = 0;
  std::string coordinator;
  std::string job;
  std::string log_level = "warn";
  std::string coordinator_timeline;
  bool no_prefix = false;
  // Elastic jobs (docs/elastic.md): on with --min-np.
  int min_np = 0;
  double elastic_timeout_s = 600;
  int reset_limit = -1;  // failures the job survives; -1: no limit
  int max_np = 0;        // 0: no limit
  std::string discovery_script;
  int slots_per_host = 1;
  std::vector<double> blacklist_cooldown;  // {min, max} seconds; empty: for the rest of the job
  std::string bind_to = "auto";
  bool report_bindings = false;
  std::vector<std::string> command;
};

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

// CLI11 only knows one-letter short options, yet "-np" is what every MPI user types. Rewrite it
// to "--np", but only before the program: the program's own arguments are not ours to touch.
std::vector<std::string> NormalizeArgs(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a == "-np" || a.rfind("-np=", 0) == 0) a.insert(0, "-");
    if (a == "--np" || a == "-n" || a == "--coordinator" || a == "--job" || a == "--log-level" ||
        a == "--coordinator-timeline" || a == "--min-np" || a == "--max-np" ||
        a == "--elastic-timeout" || a == "--reset-limit" || a == "--host-discovery-script" ||
        a == "--bind-to" ||
        a == "--slots-per-host") {
      ++i;  // skip the value
    } else if (a == "--blacklist-cooldown-range") {
      i += 2;  // MIN MAX
    } else if (a.empty() || a[0] != '-') {
      break;  // the program
    }
  }
  return args;
}

// CLI11 cannot know about PROGRAM, which is deliberately not one of its positionals.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string name) const override {
    return "Usage: " + name + " -np N [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

// Returns the exit code if tuttirun should stop right away (help, usage errors).
std::optional<int> ParseOptions(int argc, char** argv, Options& opts) {
  CLI::App app{"Runs NP local ranks of PROGRAM as one tutti job.", "tuttirun"};
  app.footer(
      "PROGRAM [ARGS...] follow the options and are passed on untouched.\n"
      "Each rank gets TUTTI_COORDINATOR, TUTTI_JOB, TUTTI_TOKEN, TUTTI_RANK and TUTTI_SIZE,\n"
      "and horovodrun's HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE;\n"
      "its output lines are prefixed with \"[rank] \". Exits with the first failing rank's\n"
      "status (128+N for signal N) after stopping the others.");
  app.formatter(std::make_shared<UsageFormatter>());
  app.add_option("-n,--np", opts.np,
                 "Number of ranks (-np also accepted); with --host-discovery-script, how many "
                 "to start with (default: every slot it lists, up to --max-np)");
  app.add_option("--coordinator", opts.coordinator,
                 "Coordinator endpoint, e.g. tcp://host:port (default: start one in-process)");
  app.add_option("--job", opts.job, "Job id (default: a fresh tuttirun-<hex> id)");
  app.add_option("--log-level", opts.log_level, "Embedded coordinator's log level")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--coordinator-timeline", opts.coordinator_timeline,
                 "Embedded coordinator's negotiation timeline (Chrome trace JSON), to merge with "
                 "the ranks' TUTTI_TIMELINE files (docs/timeline.md)");
  app.add_flag("--no-prefix", opts.no_prefix,
               "Pass the ranks' output lines through without the \"[rank] \" prefix (for "
               "programs whose output is parsed, such as benchmarks)");
  app.add_option("--min-np", opts.min_np,
                 "Run an elastic job (docs/elastic.md): a rank that fails is dropped and the others "
                 "go on in the job's next membership epoch, as long as at least this many remain")
      ->check(CLI::PositiveNumber);
  app.add_option("--elastic-timeout", opts.elastic_timeout_s,
                 "Elastic jobs: seconds the job may have fewer than --min-np ranks before it ends")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--reset-limit", opts.reset_limit,
                 "Elastic jobs: rank failures the job survives; one more ends it (default: no "
                 "limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-np", opts.max_np,
                 "Elastic jobs: the most ranks the job may have; ranks added beyond are refused")
      ->check(CLI::PositiveNumber);
  app.add_option("--host-discovery-script", opts.discovery_script,
                 "Elastic jobs: a command printing the available hosts, one HOST or HOST:SLOTS "
                 "per line, run every second: ranks start on new hosts' slots (up to --max-np) "
                 "and stop on hosts no longer listed. Hosts naming this machine (localhost, "
                 "127.0.0.x) are started here, each with its own TUTTI_HOST_ID");
  app.add_option("--slots-per-host", opts.slots_per_host,
                 "Elastic jobs: slots of a discovered host listed without :SLOTS")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--blacklist-cooldown-range", opts.blacklist_cooldown,
                 "Elastic jobs: MIN MAX seconds a host whose rank failed gets no new ranks (its "
                 "n-th time: min(MAX, MIN * 2^(n-1))); default: for the rest of the job")
      ->expected(2)
      ->allow_extra_args(false)
      ->check(CLI::PositiveNumber);
  app.add_option("--bind-to", opts.bind_to,
                 "CPUs of each rank, as mpirun's --bind-to: core (a core of its own), hwthread, "
                 "socket (shared by the ranks on it), none; auto: core when every rank can have "
                 "one, else none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "hwthread", "core", "socket"}));
  app.add_flag("--report-bindings", opts.report_bindings,
               "Say on stderr which CPUs each rank is bound to");
  // Everything from PROGRAM on is left unparsed, leading dashes included.
  app.prefix_command();

  std::vector<std::string> args = NormalizeArgs(argc, argv);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsageError;
  }

  opts.command = app.remaining();
  // CLI11 leaves the "--" that may separate our options from the program.
  if (!opts.command.empty() && opts.command[0] == "--") opts.command.erase(opts.command.begin());
  std::string problem;
  const bool discovery = !opts.discovery_script.empty();
  if (!discovery && !app.count("--np")) {
    problem = "-np is required (or --host-discovery-script, which can size the job)";
  } else if (app.count("--np") && opts.np < 1) {
    problem = "-np must be at least 1";
  } else if (opts.min_np == 0 &&
             (app.count("--max-np") || discovery || app.count("--slots-per-host") ||
              app.count("--blacklist-cooldown-range"))) {
    problem = "--max-np, --host-discovery-script, --slots-per-host and "
              "--blacklist-cooldown-range are for elastic jobs: give --min-np";
  } else if (opts.blacklist_cooldown.size() == 2 &&
             opts.blacklist_cooldown[0] > opts.blacklist_cooldown[1]) {
    problem = "--blacklist-cooldown-range: MIN must not be more than MAX";
  } else if (opts.max_np > 0 && opts.max_np < std::max(opts.min_np, opts.np)) {
    problem = "--max-np " + std::to_string(opts.max_np) + " is less than " +
              (opts.np > opts.min_np ? "-np " + std::to_string(opts.np)
                                     : "--min-np " + std::to_string(opts.min_np));
  } else if (opts.command.empty()) {
    problem = "no program given";
  } else if (opts.command[0].size() > 1 && opts.command[0][0] == '-') {
    // prefix_command() stops at the first unknown option too; a typo must not become PROGRAM.
    problem = "unknown option " + opts.command[0];
  } else if (app.count("--coordinator") && opts.coordinator.empty()) {
    problem = "--coordinator must not be empty";
  } else if (app.count("--job") && opts.job.empty()) {
    problem = "--job must not be empty";
  } else if (opts.min_np == 0 && (app.count("--elastic-timeout") || app.count("--reset-limit"))) {
    problem = "--elastic-timeout and --reset-limit are for elastic jobs: give --min-np";
  } else if (app.count("--np") && opts.min_np > opts.np) {
    problem = "--min-np " + std::to_string(opts.min_np) + " is more than -np " +
              std::to_string(opts.np);
  } else if (discovery && (opts.bind_to == "core" || opts.bind_to == "hwthread")) {
    problem = "--bind-to " + opts.bind_to +
              ": the ranks of a --host-discovery-script job come and go; bind them with "
              "--bind-to socket or none";
  }
  if (!problem.empty()) {
    Say(problem + "\nRun with --help for more information.");
    return kUsageError;
  }
  return std::nullopt;
}

// `host`: the discovered host the rank runs for (empty without discovery). `opts.np` is the
// job's first size; a rank numbered at or above it is one added to the running elastic job.
std::vector<std::string> RankEnvironment(const Options& opts, const std::string& coordinator,
                                         const std::string& token, int rank,
                                         const std::string& host) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"TUTTI_COORDINATOR", coordinator}, {"TUTTI_JOB", opts.job},
      {"TUTTI_TOKEN", token},             {"TUTTI_RANK", std::to_string(rank)},
      {"TUTTI_SIZE", std::to_string(opts.np)},
      // horovodrun's names, for Horovod scripts and tests that read them (all ranks are local).
      {"HOROVOD_RANK", std::to_string(rank)}, {"HOROVOD_SIZE", std::to_string(opts.np)},
      {"HOROVOD_LOCAL_RANK", std::to_string(rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(opts.np)},
      {"HOROVOD_CROSS_RANK", "0"}, {"HOROVOD_CROSS_SIZE", "1"}};
  if (opts.min_np > 0) {
    ours.insert(ours.end(), {{"TUTTI_ELASTIC", "1"},
                             {"TUTTI_MIN_SIZE", std::to_string(opts.min_np)},
                             {"TUTTI_ELASTIC_TIMEOUT", std::to_string(opts.elastic_timeout_s)}});
  }
  if (opts.max_np > 0) ours.emplace_back("TUTTI_MAX_SIZE", std::to_string(opts.max_np));
  if (!host.empty()) {
    ours.emplace_back("TUTTI_HOST_ID", host);
    ours.emplace_back("HOROVOD_HOSTNAME", host);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool overridden = false;
    for (const auto& [key, value] : ours) {
      overridden |= kv.size() > key.size() && kv.substr(0, key.size()) == key &&
                    kv[key.size()] == '=';
    }
    if (!overridden) env.emplace_back(kv);
  }
  for (const auto& [key, value] : ours) env.push_back(key + "=" + value);
  return env;
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

int Main(int argc, char** argv) {
  Options opts;
  if (auto code = ParseOptions(argc, argv, opts)) return *code;

  const std::string token = RandomHex(16);
  if (opts.job.empty()) opts.job = "tuttirun-" + RandomHex(8);
  tutti::launcher::SetLinePrefixes(!opts.no_prefix);

  // Bound before anything starts, so that a binding that cannot be met is a usage error.
  std::string binding_problem;
  const bool discovery = !opts.discovery_script.empty();
  const auto binding = tutti::launcher::CpuBinding::Make(
      discovery && opts.bind_to == "auto" ? "none" : opts.bind_to, discovery ? opts.max_np : opts.np,
      tutti::launcher::AllowedCpus(), &binding_problem);
  if (!binding) {
    Say(binding_problem);
    return kUsageError;
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
      embedded = std::make_unique<EmbeddedCoordinator>(options);
    } catch (const std::exception& e) {
      Say(std::string("cannot start the embedded coordinator: ") + e.what());
      return 1;
    }
    coordinator = embedded->endpoint();
  }

  const auto start_rank = [&](RankProcess& process, const std::string& host) {
    if (opts.report_bindings)
      Say("rank " + std::to_string(process.rank()) +
          (binding->bound() ? " bound to " + binding->Describe(process.rank()) : " is not bound"));
    process.Start(opts.command, RankEnvironment(opts, coordinator, token, process.rank(), host),
                  binding->For(process.rank()));
  };

  std::vector<std::unique_ptr<RankProcess>> ranks;
  if (discovery) {
    tutti::launcher::Scaler::Settings settings;
    settings.script = opts.discovery_script;
    settings.slots_per_host = opts.slots_per_host;
    settings.max_np = opts.max_np;
    if (opts.blacklist_cooldown.size() == 2) {
      settings.cooldown_min_s = opts.blacklist_cooldown[0];
      settings.cooldown_max_s = opts.blacklist_cooldown[1];
    }
    tutti::launcher::Scaler scaler(settings, [&](int rank, const std::string& host) {
      auto process = std::make_unique<RankProcess>(rank, host);
      start_rank(*process, host);
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
  for (int rank = 0; rank < opts.np; ++rank) {
    auto process = std::make_unique<RankProcess>(rank);
    try {
      start_rank(*process, "");
    } catch (const std::exception& e) {
      Say("cannot start rank " + std::to_string(rank) + ": " + e.what());
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
