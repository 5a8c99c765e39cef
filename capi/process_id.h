// The calling process's id for the fork guard (fence.h), without a system call: glibc stopped
// caching getpid(), and the guard runs at every entry point, three times per request. Read from
// any thread.
#pragma once

#include <sys/types.h>

namespace tutti::capi {

// getpid() as of the library's load or the last fork() (a pthread_atfork child handler updates
// it). A child made without fork()'s handlers (a raw clone(), _Fork()) reads its parent's id,
// and is not told that it cannot use the parent's runtime.
pid_t CurrentProcess();

}  // namespace tutti::capi
