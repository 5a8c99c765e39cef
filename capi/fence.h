// The guards every entry point runs behind. The exception fence: no C++ exception may cross the C
// ABI (a C caller cannot catch it, and unwinding through its frames is undefined), so each one
// becomes TUTTI_ERR_INTERNAL naming the function. The fork guard: after fork() the child holds a
// copy of the runtime without its threads; it must not touch it (nor tear it down), and is told
// why. Nothing here holds state; the error text it records is the calling thread's own.
#pragma once

#include <unistd.h>

#include <exception>
#include <string>

#include "capi/handles.h"
#include "capi/process_id.h"
#include "capi/status_text.h"

namespace tutti::capi {

// Runs `body` with the thread's last error cleared; no exception leaves the library.
template <typename Body>
tutti_status_t Fenced(const char* function, Body&& body) noexcept {
  try {
    ClearError();
    return body();
  } catch (const std::exception& e) {
    return Fail(TUTTI_ERR_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return Fail(TUTTI_ERR_INTERNAL, std::string(function) + ": unknown exception");
  }
}

inline tutti_status_t ForkedChild(pid_t owner) {
  return Invalid("this runtime belongs to process " + std::to_string(owner) +
                 "; a process forked from it cannot use it (call tutti_init in the child)");
}

}  // namespace tutti::capi

// Macros rather than functions because they return from the entry point that uses them.
#define TUTTI_CHECK_RUNTIME(rt)                                                        \
  if ((rt) == nullptr || !(rt)->runtime) return ::tutti::capi::Invalid("runtime is NULL"); \
  if ((rt)->runtime->owner() != ::tutti::capi::CurrentProcess())                    \
  return ::tutti::capi::ForkedChild((rt)->runtime->owner())
#define TUTTI_CHECK_REQUEST(request)                                           \
  if ((request) == nullptr) return ::tutti::capi::Invalid("request is NULL"); \
  if ((request)->owner != ::tutti::capi::CurrentProcess())                \
  return ::tutti::capi::ForkedChild((request)->owner)
#define TUTTI_CHECK_OUT(p) \
  if ((p) == nullptr) return ::tutti::capi::Invalid(#p " is NULL")
