// tuttirun's in-process coordinator (docs/launcher.md): a tuttid core on its own thread, owned so
// that every exit path of tuttirun stops and joins it. Main thread only; the coordinator's state
// belongs to its thread.
#pragma once

#include <exception>
#include <string>
#include <thread>

#include "launcher/output.h"
#include "server/service/coordinator.h"

namespace tutti::launcher {

class EmbeddedCoordinator {
 public:
  // Throws what tutti::server::Coordinator's constructor throws (it cannot bind, say).
  explicit EmbeddedCoordinator(const tutti::server::CoordinatorOptions& options)
      : coordinator_(options) {
    thread_ = std::thread([this] {
      try {
        coordinator_.Run();
      } catch (const std::exception& e) {
        // The ranks will fail to reach it and report that; say why here.
        Say(std::string("embedded coordinator stopped: ") + e.what());
      }
    });
  }
  ~EmbeddedCoordinator() {
    coordinator_.Stop();
    thread_.join();
  }
  const std::string& endpoint() const { return coordinator_.endpoint(); }

 private:
  tutti::server::Coordinator coordinator_;
  std::thread thread_;
};

}  // namespace tutti::launcher
