// tuttid: the tutti coordinator service. Orders the collectives of every process set of every job
// that connects; never sees tensor data. docs/operations.md: configuration, systemd, metrics.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "proto/protocol.h"
#include "server/core/service_metrics.h"
#include "server/security/curve_keys.h"
#include "server/service/coordinator.h"
#include "server/service/ha_member.h"
#include "server/service/status_board.h"
#include "server/service/status_server.h"
#include "server/service/systemd_notifier.h"

#ifndef TUTTI_VERSION_STRING
#define TUTTI_VERSION_STRING "unknown"
#endif

namespace {
tutti::server::Coordinator* g_coordinator = nullptr;
void OnSignal(int) {
  if (g_coordinator) g_coordinator->Stop();
}

struct Settings {
  tutti::server::CoordinatorOptions coordinator;
  std::string log_level = "info";
  double stall_warning_s = 60, stall_shutdown_s = 0;
  std::string http;
  tutti::server::HttpCredentials http_credentials;
  size_t metrics_max_sets = tutti::server::SetMetrics::kDefaultMaxLabelledSets;
  std::string curve_secret_key_file, curve_clients_file;
  bool generate_keypair = false;
  bool exit_with_parent = false;
  tutti::server::HaOptions ha;
};

// Numbers with a message that names the value, unlike CLI11's range checks.
CLI::Validator Number(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& value) -> std::string {
        double number = 0;
        size_t used = 0;
        try {
          number = std::stod(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == value.size() && value.size() > 0 && (number > 0 || (zero_allowed && number == 0)))
          return "";
        return std::string("must be a ") + (zero_allowed ? "non-negative" : "positive") +
               " number, got '" + value + "'";
      },
      zero_allowed ? "NUMBER>=0" : "NUMBER>0");
}

// Flags, then the config file, then TUTTI_* environment variables, then defaults: CLI11's order.
void DefineOptions(CLI::App& app, Settings& s) {
  auto& o = s.coordinator;
  app.set_config("--config", "",
                 "read settings from this TOML file: one `key = value` per flag, named like the "
                 "flag without its dashes (an unknown key is refused)");
  app.allow_config_extras(false);
  app.add_option("--bind", o.bind, "ZeroMQ endpoint to listen on ('*' as port: OS-chosen)")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--rendezvous-timeout-ms", o.rendezvous_timeout_ms,
                 "rendezvous deadline for jobs whose ranks do not set one")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--heartbeat-ms", o.heartbeat_interval_ms,
                 "how often ranks send a heartbeat (sent to them at registration)")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--lease-ms", o.lease_ms,
                 "silence after which a rank is declared lost (and ranks declare tuttid lost)")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--probe-timeout-ms", o.probe_timeout_ms,
                 "how long a rank whose peer reported its data-plane connection closed has to "
                 "answer a probe before it is declared lost")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--max-jobs", o.max_jobs, "jobs served at once; more are refused")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--max-pending-tensors", o.max_pending_tensors,
                 "tensors one job may have announced by some members only; more are refused")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--max-registrations-per-second", o.max_registrations_per_second,
                 "registrations a second from one address (bursts of up to "
                 "--registration-burst); more are refused (0: no limit)")
      ->capture_default_str()
      ->check(Number(true));
  app.add_option("--registration-burst", o.registration_burst,
                 "registrations one address may make at once")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--max-rendezvous-jobs-per-address", o.max_rendezvous_jobs_per_address,
                 "jobs one address may have waiting for their rendezvous")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--max-rendezvous-ranks-per-address", o.max_rendezvous_ranks_per_address,
                 "ranks those jobs may declare in all (tuttid keeps state for each)")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--stall-warning-seconds", s.stall_warning_s,
                 "warn about tensors some ranks of a set submitted and others did not after this "
                 "long (0: never); a job's ranks may set their own (TUTTI_STALL_WARNING_SECONDS)")
      ->capture_default_str()
      ->envname("TUTTI_STALL_WARNING_SECONDS")
      ->check(Number(true));
  app.add_option("--stall-shutdown-seconds", s.stall_shutdown_s,
                 "fail such tensors on every member after this long (0: never)")
      ->capture_default_str()
      ->envname("TUTTI_STALL_SHUTDOWN_SECONDS")
      ->check(Number(true));
  app.add_option("--autotune-trial-tensors", o.autotune_trial_tensors,
                 "autotuned sets (TUTTI_AUTOTUNE=1): tensors released per trial, at least")
      ->capture_default_str()
      ->check(Number(false));
  app.add_option("--autotune-trial-ms", o.autotune_trial_ms,
                 "autotuned sets: milliseconds per trial, at least")
      ->capture_default_str()
      ->check(Number(true));
  app.add_option("--autotune-warmup-tensors", o.autotune_warmup_tensors,
                 "autotuned sets: tensors released before the first trial")
      ->capture_default_str()
      ->check(Number(true));
  app.add_option("--timeline", o.timeline,
                 "write every negotiation (arrivals per rank, release) to this Chrome-trace JSON "
                 "file; merge it with the ranks' timelines using tools/tutti_timeline_merge.py");
  app.add_option("--metrics-max-sets", s.metrics_max_sets,
                 "process sets with Prometheus series of their own ({job, set} labels); later "
                 "ones share job=\"_other\", set=\"_other\"")
      ->capture_default_str()
      ->envname("TUTTID_METRICS_MAX_SETS");
  app.add_option("--http", s.http,
                 "serve the status page (/status, /status.json) and Prometheus metrics (/metrics) "
                 "on host:port (port 0: OS-chosen); empty: off")
      ->envname("TUTTID_HTTP");
  // Secrets: meant for the config file (mode 0600), since a command line is visible to every
  // user of the machine.
  app.add_option("--http-token", s.http_credentials.token,
                 "require this bearer token (Authorization: Bearer ...) on every HTTP endpoint but "
                 "/healthz; set it in the config file, not on the command line")
      ->envname("TUTTID_HTTP_TOKEN");
  app.add_option("--http-user", s.http_credentials.user,
                 "accept HTTP basic credentials of this user (with --http-password) on every "
                 "HTTP endpoint but /healthz");
  app.add_option("--http-password", s.http_credentials.password,
                 "the password of --http-user; set it in the config file")
      ->envname("TUTTID_HTTP_PASSWORD");
  app.add_option("--curve-secret-key-file", s.curve_secret_key_file,
                 "require CURVE: tuttid's key pair (TOML, secret_key = \"...\"); needs "
                 "--curve-clients")
      ->check(CLI::ExistingFile);
  app.add_option("--curve-clients", s.curve_clients_file,
                 "CURVE allow-list (TOML): [jobs.<job>] ranks = [\"<rank 0's public key>\", ...]")
      ->check(CLI::ExistingFile);
  app.add_flag("--generate-curve-keypair", s.generate_keypair,
               "print a fresh CURVE key pair (TOML) and exit")
      ->configurable(false);
  app.add_flag("--exit-with-parent", s.exit_with_parent,
               "stop (as on SIGTERM) when the process that started tuttid ends: a job's own "
               "coordinator, started by one of its ranks (docs/launchers.md)")
      ->configurable(false);
  app.add_flag("--exit-when-idle", s.coordinator.exit_when_idle,
               "stop once every job it has served has ended (all their ranks left, or the job "
               "failed): a job's own coordinator, started by one of its ranks")
      ->configurable(false);
  app.add_option("--etcd", s.ha.etcd,
                 "run as a member of an HA group coordinated through this etcd (a client URL, "
                 "http://HOST:PORT); needs --ha-group (docs/high-availability.md)")
      ->envname("TUTTID_ETCD");
  app.add_option("--ha-group", s.ha.group,
                 "the HA group's name: its members share one etcd prefix, /tutti/GROUP/")
      ->envname("TUTTID_HA_GROUP");
  app.add_option("--ha-advertise", s.ha.advertise,
                 "this member's endpoint as ranks list it in TUTTI_COORDINATOR (default: the "
                 "bound endpoint)");
  app.add_option("--ha-ttl-seconds", s.ha.ttl_s,
                 "the leader lease's TTL: a dead leader is replaced after about this long")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{60}));
  app.add_option("--log-level", s.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string("tuttid ") + TUTTI_VERSION_STRING + " (protocol " +
                                        std::to_string(tutti::wire::kProtocolVersion) + ")");
}

// Every rank holds one connection to tuttid, a descriptor: the usual soft limit of 1024 would cap
// tuttid at about a thousand ranks. The hard limit is what the system allows this process.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t soft = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
    spdlog::warn("could not raise the open-file limit from {} to {}: at most about {} ranks", soft,
                 limit.rlim_max, soft);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  CLI::App app{"tuttid: the tutti coordinator service"};
  DefineOptions(app, settings);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Name the file as well when the bad setting may have come from it.
    const bool from_file = app.get_config_ptr() && app.get_config_ptr()->count() > 0;
    if (e.get_exit_code() == 0 || !from_file) return app.exit(e);
    std::string what = e.what();
    const std::string extra = "INI was not able to parse ";  // CLI11's words for an unknown key
    if (what.rfind(extra, 0) == 0) what = "unknown key '" + what.substr(extra.size()) + "'";
    std::fprintf(stderr, "tuttid: config file %s: %s\n",
                 app.get_config_ptr()->as<std::string>().c_str(), what.c_str());
    return 2;
  }
  if (settings.generate_keypair) {
    std::fputs(tutti::server::GenerateCurveKeyPairToml().c_str(), stdout);
    return 0;
  }
  if (settings.exit_with_parent) {
    // The parent may already be gone: then getppid() is no longer the pid that started us.
    const pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (parent == 1 || getppid() != parent) return 1;
  }
  auto& options = settings.coordinator;
  options.stall_warning_ms = static_cast<int64_t>(settings.stall_warning_s * 1000);
  options.stall_shutdown_ms = static_cast<int64_t>(settings.stall_shutdown_s * 1000);

  // Logs go to stderr; stdout carries only the lines that scripts and tests read.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tuttid"));
  spdlog::set_level(spdlog::level::from_str(settings.log_level));
  RaiseFileLimit();

  if (settings.curve_secret_key_file.empty() != settings.curve_clients_file.empty()) {
    // Authentication half-configured would either admit everyone or no one: refuse to start.
    spdlog::error("CURVE needs both --curve-secret-key-file and --curve-clients (only {} is set)",
                  settings.curve_clients_file.empty() ? "--curve-secret-key-file"
                                                      : "--curve-clients");
    return 2;
  }
  if (!settings.curve_secret_key_file.empty()) {
    auto keys = std::make_shared<tutti::server::CurveServerKeys>();
    tutti::Status status = tutti::server::LoadCurveServerKeys(settings.curve_secret_key_file,
                                                              settings.curve_clients_file, keys.get());
    if (!status.ok()) {
      spdlog::error("{}", status.message());
      return 2;
    }
    spdlog::info("CURVE on: public key {}, {} client keys", keys->public_key, keys->clients.size());
    options.curve = std::move(keys);
  }

  if (settings.ha.etcd.empty() != settings.ha.group.empty()) {
    spdlog::error("an HA group needs both --etcd and --ha-group (only {} is set)",
                  settings.ha.etcd.empty() ? "--ha-group" : "--etcd");
    return 2;
  }
  if (const char* die = std::getenv("TUTTID_TEST_DIE_MID_EXECUTE")) options.test_die_mid_execute = std::atoll(die);
  std::shared_ptr<tutti::server::HaMember> ha;
  if (!settings.ha.etcd.empty()) {
    std::random_device device;
    const uint64_t proposed = (uint64_t{device()} << 32) | device();
    tutti::Status status =
        tutti::server::HaMember::GroupEpoch(settings.ha, proposed | 1, &options.epoch);
    if (!status.ok()) {
      spdlog::error("HA group '{}': cannot read the group's epoch: {}", settings.ha.group,
                    status.message());
      return 1;
    }
    ha = std::make_shared<tutti::server::HaMember>(settings.ha);
    options.ha = ha;
  }

  try {
    tutti::server::SystemdNotifier notifier;
    tutti::server::ServiceMetrics metrics;
    metrics.sets().set_max_labelled_sets(settings.metrics_max_sets);
    tutti::server::StatusBoard board;
    options.metrics = &metrics;
    options.status = &board;
    options.on_iteration = [&notifier] { notifier.Ping(); };
    if (notifier.ping_interval().count() > 0)
      options.max_iteration_gap_ms = std::min<int64_t>(options.max_iteration_gap_ms,
                                                       notifier.ping_interval().count());
    tutti::server::Coordinator coordinator(options);
    std::optional<tutti::server::StatusServer> http;
    if (!settings.http_credentials.user.empty() && settings.http_credentials.password.empty())
      throw std::runtime_error("--http-user needs --http-password");
    if (!settings.http.empty()) {
      http.emplace(settings.http, &board, &metrics, settings.http_credentials);
      const bool loopback = settings.http.rfind("127.", 0) == 0 ||
                            settings.http.rfind("localhost:", 0) == 0 ||
                            settings.http.rfind("[::1]:", 0) == 0;
      if (!loopback && !settings.http_credentials.any())
        spdlog::warn("the status page and metrics on {} need no credentials: anyone who reaches "
                     "that address reads job names, ranks and counters (set http-token, or "
                     "http-user and http-password, in the config file)", settings.http);
    }
    g_coordinator = &coordinator;
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    if (ha) ha->Start(coordinator.endpoint());
    std::printf("tuttid listening on %s\n", coordinator.endpoint().c_str());
    if (http) std::printf("tuttid status page on %s/status\n", http->url().c_str());
    std::fflush(stdout);
    // Ready only now: the sockets are bound, so a unit ordered after tuttid can connect at once.
    notifier.Ready("listening on " + coordinator.endpoint() +
                   (http ? ", status page on " + http->url() : std::string()));
    coordinator.Run();
    notifier.Stopping("told every rank that tuttid is stopping");
    g_coordinator = nullptr;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
