#include "server/service/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <spdlog/spdlog.h>

namespace tutti::server {

SystemdNotifier::SystemdNotifier() {
  uint64_t usec = 0;
  // unset_environment = 0: the variables stay for anything tuttid might exec (it execs nothing).
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    // Pinging at half the period leaves a whole half for a slow iteration.
    interval_ = std::chrono::milliseconds(std::max<uint64_t>(usec / 2000, 1));
    spdlog::info("systemd watchdog: {} ms, pinging every {} ms", usec / 1000, interval_.count());
  }
}

void SystemdNotifier::Ready(const std::string& status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
  last_ping_ = std::chrono::steady_clock::now();
}

void SystemdNotifier::Ping() {
  if (interval_.count() == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ < interval_) return;
  sd_notify(0, "WATCHDOG=1");
  last_ping_ = now;
}

void SystemdNotifier::Stopping(const std::string& status) {
  sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status.c_str());
}

}  // namespace tutti::server
