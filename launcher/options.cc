#include "launcher/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "launcher/horovod_flags.h"
#include "launcher/host_discovery.h"
#include "launcher/output.h"

namespace tutti::launcher {
namespace {

// Options whose value is the next argument, for NormalizeArgs to skip over.
const char* const kTakesValue[] = {
    "--np", "-n", "--coordinator", "--job", "--log-level", "--coordinator-timeline", "--min-np",
    "--max-np", "--elastic-timeout", "--reset-limit", "--host-discovery-script", "--bind-to",
    "--slots-per-host", "-H", "--hosts", "--hostfile", "-p", "--ssh-port", "-i",
    "--ssh-identity-file", "--ssh-option", "--start-timeout", "--network-interface", "-x", "--env"};

// CLI11 only knows one-letter short options, yet "-np" is what every MPI user types, and
// horovodrun also spells --hostfile "-hostfile". Rewrite them to their long forms, but only
// before the program: the program's own arguments are not ours to touch.
std::vector<std::string> NormalizeArgs(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    for (const char* single : {"-np", "-hostfile"}) {
      const std::string s(single);
      if (a == s || a.rfind(s + "=", 0) == 0) a.insert(0, "-");
    }
    const auto& horovod = HorovodFlagsTakingValues();
    if (std::find(std::begin(kTakesValue), std::end(kTakesValue), a) != std::end(kTakesValue) ||
        std::find(horovod.begin(), horovod.end(), a) != horovod.end()) {
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
    return "Usage: " + name + " -np N [-H HOST:SLOTS,...] [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

void AddOptions(CLI::App& app, Options& opts) {
  app.add_option("-n,--np", opts.np,
                 "Number of ranks (-np also accepted); with -H or --hostfile, default every slot; "
                 "with --host-discovery-script, how many to start with (default: every slot it "
                 "lists, up to --max-np)");
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
                 "CPUs of each rank started on this machine, as mpirun's --bind-to: core (a core "
                 "of its own), hwthread, socket (shared by the ranks on it), none; auto: core "
                 "when every rank can have one, else none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "hwthread", "core", "socket"}));
  app.add_flag("--report-bindings", opts.report_bindings,
               "Say on stderr which CPUs each rank is bound to");
}

void AddHostOptions(CLI::App& app, Options& opts, std::string& hosts_text, std::string& hostfile) {
  app.add_option("-H,--hosts", hosts_text,
                 "Hosts and their slots, HOST:SLOTS,HOST:SLOTS,... (HOST alone: 1 slot); ranks "
                 "fill them in order; hosts other than this machine are started over ssh");
  app.add_option("--hostfile", hostfile,
                 "A file of hosts (-hostfile also accepted): 'HOST slots=N', 'HOST:N' or 'HOST' "
                 "per line, '#' starts a comment");
  app.add_option("-p,--ssh-port", opts.ssh.port, "SSH port of every remote host")
      ->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", opts.ssh.identity_file,
                 "The private key ssh authenticates with");
  app.add_option("--ssh-option", opts.ssh.options,
                 "An ssh option (-o OPTION), e.g. --ssh-option User=alice; repeatable")
      ->allow_extra_args(false);
  app.add_option("--start-timeout", opts.start_timeout_s,
                 "Seconds every remote host has to answer ssh before any rank starts")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--network-interface", opts.network_interface,
                 "The interface whose IPv4 address remote ranks reach the coordinator at "
                 "(default: this machine's address on the route to the first remote host)");
  app.add_option("-x,--env", opts.exports,
                 "NAME: also forward tuttirun's NAME to remote ranks; NAME=VALUE: set it for "
                 "every rank; repeatable (mpirun's -x)")
      ->allow_extra_args(false);
  app.add_flag("--verbose", opts.verbose,
               "Say where the coordinator listens and which ssh command starts each remote rank");
}

bool IsLoopbackEndpoint(const std::string& endpoint) {
  return endpoint.rfind("tcp://127.", 0) == 0 || endpoint.rfind("tcp://localhost:", 0) == 0 ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

// The usage problems that involve the hosts of a job across hosts; empty when there are none.
std::string HostProblem(const CLI::App& app, Options& opts, const std::string& hosts_text,
                        const std::string& hostfile) {
  const bool given_hosts = app.count("--hosts") || app.count("--hostfile");
  if (app.count("--hosts") && app.count("--hostfile"))
    return "-H and --hostfile are alternatives: give one";
  if (given_hosts && !opts.discovery_script.empty())
    return "-H/--hostfile and --host-discovery-script are alternatives: give one";
  if (!given_hosts && (app.count("--ssh-port") || app.count("--ssh-identity-file") ||
                       app.count("--ssh-option") || app.count("--start-timeout") ||
                       app.count("--network-interface")))
    return "-p, -i, --ssh-option, --start-timeout and --network-interface are for jobs across "
           "hosts: give -H or --hostfile";
  for (const std::string& e : opts.exports) {
    const std::string name = e.substr(0, e.find('='));
    if (!IsVariableName(name)) return "-x '" + e + "': '" + name + "' is not a variable name";
    if (e.find('=') == std::string::npos && std::getenv(name.c_str()) == nullptr)
      return "-x " + name + ": " + name + " is not set in tuttirun's environment";
  }
  if (!given_hosts) return "";
  std::string error;
  if (app.count("--hosts") ? !ParseHostList(hosts_text, &opts.hosts, &error)
                           : !ParseHostfile(hostfile, &opts.hosts, &error))
    return error;
  const int slots = TotalSlots(opts.hosts);
  if (!app.count("--np")) opts.np = std::min(slots, opts.max_np > 0 ? opts.max_np : slots);
  if (opts.np > slots)
    return "-np " + std::to_string(opts.np) + " is more than the " + std::to_string(slots) +
           " slots of the hosts (" + (app.count("--hosts") ? "-H" : "--hostfile") + ")";
  std::string remote;
  for (const Placement& p : PlaceRanks(opts.hosts, opts.np))
    if (remote.empty() && !IsThisMachine(p.host)) remote = p.host;
  if (remote.empty()) return "";
  if (opts.bind_to == "core" || opts.bind_to == "hwthread" || opts.bind_to == "socket")
    return "--bind-to " + opts.bind_to +
           ": tuttirun binds the ranks it starts on this machine only, and host '" + remote +
           "' is another; give --bind-to auto or none";
  if (!opts.coordinator.empty() && IsLoopbackEndpoint(opts.coordinator))
    return "--coordinator " + opts.coordinator + " is a loopback address, which host '" + remote +
           "' cannot reach";
  return "";
}

// The usage problems of options that do not involve the hosts; empty when there are none.
std::string OptionProblem(const CLI::App& app, const Options& opts) {
  const bool discovery = !opts.discovery_script.empty();
  const bool sized = app.count("--np") || !opts.hosts.empty();
  if (!discovery && !sized) {
    return "-np is required (or -H, --hostfile or --host-discovery-script, which can size "
           "the job)";
  }
  if (app.count("--np") && opts.np < 1) {
    return "-np must be at least 1";
  }
  if (opts.min_np == 0 && (app.count("--max-np") || discovery || app.count("--slots-per-host") ||
                           app.count("--blacklist-cooldown-range"))) {
    return "--max-np, --host-discovery-script, --slots-per-host and "
           "--blacklist-cooldown-range are for elastic jobs: give --min-np";
  }
  if (opts.blacklist_cooldown.size() == 2 &&
      opts.blacklist_cooldown[0] > opts.blacklist_cooldown[1]) {
    return "--blacklist-cooldown-range: MIN must not be more than MAX";
  }
  if (opts.max_np > 0 && opts.max_np < std::max(opts.min_np, opts.np)) {
    return "--max-np " + std::to_string(opts.max_np) + " is less than " +
           (opts.np > opts.min_np ? "-np " + std::to_string(opts.np)
                                  : "--min-np " + std::to_string(opts.min_np));
  }
  if (opts.command.empty()) {
    return "no program given";
  }
  if (opts.command[0].size() > 1 && opts.command[0][0] == '-') {
    // prefix_command() stops at the first unknown option too; a typo must not become PROGRAM.
    return "unknown option " + opts.command[0];
  }
  if (app.count("--coordinator") && opts.coordinator.empty()) {
    return "--coordinator must not be empty";
  }
  if (app.count("--job") && opts.job.empty()) {
    return "--job must not be empty";
  }
  if (opts.min_np == 0 && (app.count("--elastic-timeout") || app.count("--reset-limit"))) {
    return "--elastic-timeout and --reset-limit are for elastic jobs: give --min-np";
  }
  if (sized && opts.min_np > opts.np) {
    return "--min-np " + std::to_string(opts.min_np) + " is more than -np " +
           std::to_string(opts.np);
  }
  if (discovery && (opts.bind_to == "core" || opts.bind_to == "hwthread")) {
    return "--bind-to " + opts.bind_to +
           ": the ranks of a --host-discovery-script job come and go; bind them with "
           "--bind-to socket or none";
  }
  return "";
}

}  // namespace

std::optional<int> ParseOptions(int argc, char** argv, Options& opts) {
  CLI::App app{"Runs NP ranks of PROGRAM as one tutti job, here or across hosts over ssh.",
               "tuttirun"};
  app.footer(
      "PROGRAM [ARGS...] follow the options and are passed on untouched.\n"
      "Each rank gets TUTTI_COORDINATOR, TUTTI_JOB, TUTTI_TOKEN, TUTTI_RANK and TUTTI_SIZE,\n"
      "and horovodrun's HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE;\n"
      "its output lines are prefixed with \"[rank] \". Exits with the first failing rank's\n"
      "status (128+N for signal N) after stopping the others.");
  app.formatter(std::make_shared<UsageFormatter>());
  AddOptions(app, opts);
  std::string hosts_text, hostfile;
  AddHostOptions(app, opts, hosts_text, hostfile);
  HorovodFlags horovod;
  AddHorovodFlags(app, horovod);
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
  std::string problem = HostProblem(app, opts, hosts_text, hostfile);
  if (problem.empty()) problem = OptionProblem(app, opts);
  if (problem.empty()) problem = ApplyHorovodFlags(app, horovod, &opts.exports);
  if (!problem.empty()) {
    Say(problem + "\nRun with --help for more information.");
    return kUsageError;
  }
  return std::nullopt;
}

}  // namespace tutti::launcher
