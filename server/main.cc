// tuttid: the tutti coordinator service. Orders the collectives of every process set of every job
// that connects; never sees tensor data.
#include <csignal>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "proto/protocol.h"
#include "server/coordinator.h"

namespace {
tutti::server::Coordinator* g_coordinator = nullptr;
void OnSignal(int) {
  if (g_coordinator) g_coordinator->Stop();
}
}  // namespace

int main(int argc, char** argv) {
  tutti::server::CoordinatorOptions options;
  std::string log_level = "info";
  double stall_warning_s = 60, stall_shutdown_s = 0;
  CLI::App app{"tuttid: the tutti coordinator service"};
  app.add_option("--bind", options.bind, "ZeroMQ endpoint to listen on ('*' as port: OS-chosen)")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--rendezvous-timeout-ms", options.rendezvous_timeout_ms,
                 "rendezvous deadline for jobs whose ranks do not set one")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-ms", options.heartbeat_interval_ms,
                 "how often ranks send a heartbeat (sent to them at registration)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lease-ms", options.lease_ms,
                 "silence after which a rank is declared lost (and ranks declare tuttid lost)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-jobs", options.max_jobs, "jobs served at once; more are refused")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--stall-warning-seconds", stall_warning_s,
                 "warn about tensors some ranks of a set submitted and others did not after this "
                 "long (0: never); a job's ranks may set their own (TUTTI_STALL_WARNING_SECONDS)")
      ->capture_default_str()
      ->envname("TUTTI_STALL_WARNING_SECONDS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stall-shutdown-seconds", stall_shutdown_s,
                 "fail such tensors on every member after this long (0: never)")
      ->capture_default_str()
      ->envname("TUTTI_STALL_SHUTDOWN_SECONDS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeline", options.timeline,
                 "write every negotiation (arrivals per rank, release) to this Chrome-trace JSON "
                 "file; merge it with the ranks' timelines using tools/tutti_timeline_merge.py");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", "tuttid 0.2.0 (protocol " +
                                        std::to_string(tutti::wire::kProtocolVersion) + ")");
  CLI11_PARSE(app, argc, argv);
  options.stall_warning_ms = static_cast<int64_t>(stall_warning_s * 1000);
  options.stall_shutdown_ms = static_cast<int64_t>(stall_shutdown_s * 1000);

  // Logs go to stderr; stdout carries only the endpoint line that scripts and tests read.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tuttid"));
  spdlog::set_level(spdlog::level::from_str(log_level));

  try {
    tutti::server::Coordinator coordinator(options);
    g_coordinator = &coordinator;
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    std::printf("tuttid listening on %s\n", coordinator.endpoint().c_str());
    std::fflush(stdout);
    coordinator.Run();
    g_coordinator = nullptr;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
