// A job's own coordinator, started by one of its ranks when no tuttid was named (zero-setup
// launch: MPI mode, and PMIx/PMI2 launchers through zero_setup.h; docs/launchers.md): the
// `tuttid` binary as a child process that ends with the thread that started it (tuttid
// --exit-with-parent), once every job it served has ended (--exit-when-idle), or when this
// object is destroyed.
// libtutti links no server code: the child is the same tuttid a cluster runs as a service.
// Owned by the rank that started it; not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace tutti::bootstrap {

class TuttidChild {
 public:
  // `binary`: the tuttid to run; `bind`: its --bind endpoint (port '*': the OS chooses). Waits
  // up to `timeout_ms` for its "tuttid listening on ENDPOINT" line.
  static Status Start(const std::string& binary, const std::string& bind, int64_t timeout_ms,
                      TuttidChild* child);

  TuttidChild() = default;
  ~TuttidChild() { Stop(); }
  TuttidChild(TuttidChild&& other) noexcept { *this = std::move(other); }
  TuttidChild& operator=(TuttidChild&& other) noexcept;

  // The endpoint it listens on, as tuttid printed it (tcp://ADDRESS:PORT).
  const std::string& endpoint() const { return endpoint_; }
  bool running() const { return pid_ > 0; }
  // Waits up to `timeout_ms` for it to exit by itself (--exit-when-idle) and reaps it; whether
  // it did.
  bool WaitForExit(int64_t timeout_ms);
  // SIGTERM, then SIGKILL if it has not exited within 5 s; reaps it.
  void Stop();

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
};

// Where tuttid is: TUTTI_TUTTID, else `tuttid` beside the shared object holding `anchor`, or in
// ../bin from it, else the first `tuttid` on PATH. Empty when none is found.
std::string FindTuttid(const void* anchor);

// Starts the job's own coordinator on its first rank: the tuttid FindTuttid(anchor) finds,
// bound to 127.0.0.1 when `one_host`, else to every interface and advertised at
// AdvertisedHost(); `*endpoint` is where the job's ranks reach it.
Status StartJobCoordinator(const void* anchor, bool one_host, int64_t timeout_ms,
                           TuttidChild* child, std::string* endpoint);

// A fresh random job token (32 hex digits from the kernel's CSPRNG).
Status RandomToken(std::string* token);

// This host's first non-loopback IPv4 address (TUTTI_COORDINATOR_HOST overrides); empty if none.
std::string AdvertisedHost();

}  // namespace tutti::bootstrap
