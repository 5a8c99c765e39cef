// How an entry point reports an error: status strings, the thread-local text behind
// tutti_last_error(), and the two ways a status becomes a tutti_status_t with its text recorded.
// The text is per thread, so one thread's failure never overwrites what another is reading.
#pragma once

#include <string>

#include "common/status.h"
#include "tutti/tutti.h"

namespace tutti::capi {

const char* StatusString(tutti_status_t status);
// Records `message` as this thread's last error and returns `status`.
tutti_status_t Fail(tutti_status_t status, std::string message);
void ClearError();
const char* LastError();

// TUTTI_OK for an ok status; otherwise its code, with its message recorded as the last error.
tutti_status_t Report(const Status& status);
tutti_status_t Invalid(std::string message);

}  // namespace tutti::capi
