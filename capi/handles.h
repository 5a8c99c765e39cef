// What the opaque tutti_runtime_t and tutti_request_t of tutti.h point to. The caller owns each
// handle from the call that creates it (tutti_init; a submitting call) to the one that destroys
// it (tutti_finalize; tutti_request_free). A request shares its client::Request with the lanes
// that complete it, so freeing the handle early never frees memory a lane still writes. Both
// remember the process that created them, for the fork guard in fence.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "bootstrap/zero_setup.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

struct tutti_runtime {
  // Where tutti_init bootstrapped through the launcher (zero_setup.h): on rank 0, the job's
  // coordinator. Declared first, so that it outlives the runtime that talks to it.
  std::unique_ptr<tutti::bootstrap::ZeroSetup> zero_setup;
  std::unique_ptr<tutti::client::Runtime> runtime;  // knows its owning process: owner()
};

struct tutti_request {
  std::shared_ptr<tutti::client::Request> request;
  int64_t default_timeout_ms;  // the runtime's, for waits given a negative timeout
  pid_t owner;
  std::chrono::microseconds wait_spin;  // the runtime's: how long a wait polls before it sleeps
};
