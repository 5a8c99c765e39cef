// The runtime's log: one line per event on stderr, "tutti: ...". Warnings and errors show by
// default; TUTTI_LOG_LEVEL (trace, debug, info, warn, error, off) changes that.
#pragma once

#include <spdlog/spdlog.h>

namespace tutti::client {

spdlog::logger& Log();

}  // namespace tutti::client
