// SystemdNotifier: tuttid's side of systemd's notify protocol (sd_notify(3)): READY once the
// sockets are bound, WATCHDOG pings from the event loop, STOPPING on the way out. Every call does
// nothing when tuttid was not started with $NOTIFY_SOCKET, so the same binary runs anywhere.
// Thread model: owned and called by the thread that runs the coordinator's loop.
#pragma once

#include <chrono>
#include <string>

namespace tutti::server {

class SystemdNotifier {
 public:
  SystemdNotifier();

  // "READY=1" with a STATUS line (shown by `systemctl status`).
  void Ready(const std::string& status);
  // Sends "WATCHDOG=1" if half the watchdog period passed since the last ping. Cheap: call it on
  // every loop iteration.
  void Ping();
  // "STOPPING=1": systemd then waits for the exit instead of treating silence as a hang.
  void Stopping(const std::string& status);

  // How often Ping must be called at least (half of $WATCHDOG_USEC); zero when no watchdog runs.
  std::chrono::milliseconds ping_interval() const { return interval_; }

 private:
  std::chrono::milliseconds interval_{0};
  std::chrono::steady_clock::time_point last_ping_{};
};

}  // namespace tutti::server
