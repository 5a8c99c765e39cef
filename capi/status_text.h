// Status strings and the thread-local text behind tutti_last_error().
#pragma once

#include <string>

#include "tutti/tutti.h"

namespace tutti::capi {

const char* StatusString(tutti_status_t status);
// Records `message` as this thread's last error and returns `status`.
tutti_status_t Fail(tutti_status_t status, std::string message);
void ClearError();
const char* LastError();

}  // namespace tutti::capi
