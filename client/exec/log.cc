#include "client/exec/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_sinks.h>

namespace tutti::client {

spdlog::logger& Log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    // Not registered globally: the application may use spdlog itself.
    auto created = std::make_shared<spdlog::logger>(
        "tutti", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    created->set_pattern("tutti: %v");
    created->set_level(spdlog::level::warn);
    if (const char* level = std::getenv("TUTTI_LOG_LEVEL"))
      created->set_level(spdlog::level::from_str(level));
    return created;
  }();
  return *logger;
}

}  // namespace tutti::client
