// Coordinator: tuttid's event loop. One thread owns one ZeroMQ ROUTER socket and a
// CoordinatorCore; it decodes frames, feeds them to the core and sends what the core answers.
// Embeddable: tuttirun runs one on a thread of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/security/curve_keys.h"

namespace tutti::server {

class HaMember;
class ServiceMetrics;
class StatusBoard;

struct CoordinatorOptions {
  // ZeroMQ endpoint to bind; "tcp://127.0.0.1:*" lets the OS choose the port.
  std::string bind = "tcp://127.0.0.1:*";
  // Rendezvous deadline for a job whose ranks do not ask for one.
  int64_t rendezvous_timeout_ms = 60000;
  // Liveness (docs/failures.md): ranks send a heartbeat this often, and a rank silent for
  // `lease_ms` is declared lost; ranks likewise declare tuttid lost after `lease_ms` of silence.
  int64_t heartbeat_interval_ms = 1000;
  int64_t lease_ms = 5000;
  // Fast detection (docs/elastic.md): how long a rank whose peer reported its data-plane
  // connection closed has to echo tuttid's probe before it is declared lost.
  int64_t probe_timeout_ms = 50;
  // Autotuning's trials (docs/autotune.md), for jobs whose ranks ask for it (TUTTI_AUTOTUNE=1):
  // tensors and milliseconds per trial at least, and tensors released before the first.
  int64_t autotune_trial_tensors = 50;
  int64_t autotune_trial_ms = 1000;
  int64_t autotune_warmup_tensors = 20;
  // Jobs served at once; registrations of further jobs are refused, bounding memory.
  int64_t max_jobs = 1024;
  // Stall inspector defaults for jobs whose ranks do not set their own (0: off): warn about
  // tensors some members submitted and others did not after this long, fail them after that.
  int64_t stall_warning_ms = 60000;
  int64_t stall_shutdown_ms = 0;
  // Where to write the negotiation timeline (Chrome trace JSON); empty: none.
  std::string timeline;
  // A job's own coordinator (tuttid --exit-when-idle): Run() returns once it has served a job and
  // no job is left, so that the rank that started it need not stop it while others still talk.
  bool exit_when_idle = false;

  // Floods (docs/security.md): tensors one job may have announced by some members only;
  // registrations a second (and burst) from one address; jobs one address may have waiting for
  // their rendezvous. Beyond them requests fail with kLimitExceeded.
  int64_t max_pending_tensors = 1 << 18;
  double max_registrations_per_second = 1000;
  double registration_burst = 4096;
  int64_t max_rendezvous_jobs_per_address = 256;
  int64_t max_rendezvous_ranks_per_address = 1 << 17;

  // CURVE (docs/security.md): when set, the socket is a CURVE server and admits only listed keys.
  std::shared_ptr<const CurveServerKeys> curve;

  // High availability (docs/high-availability.md): this coordinator is a member of `ha`'s group
  // (null: a single tuttid, the default), serving only while it leads. `epoch`: the group's
  // coordinator epoch (0: a random one of its own).
  std::shared_ptr<HaMember> ha;
  uint64_t epoch = 0;

  // Tests only (TUTTID_TEST_DIE_MID_EXECUTE): at the n-th Execute frame, send it to the first
  // half of its recipients and then die (SIGKILL), as a leader killed between two sends would.
  int64_t test_die_mid_execute = 0;

  // Service hooks, all optional. `metrics` and `status` must outlive the coordinator;
  // `on_iteration` runs on the loop's thread at least every `max_iteration_gap_ms`.
  ServiceMetrics* metrics = nullptr;
  StatusBoard* status = nullptr;
  std::function<void()> on_iteration;
  int64_t max_iteration_gap_ms = 1000;
};

class Coordinator {
 public:
  // Binds the socket; throws std::runtime_error naming the endpoint if that fails.
  explicit Coordinator(const CoordinatorOptions& options);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound endpoint with the OS-chosen port filled in, e.g. "tcp://127.0.0.1:41234".
  const std::string& endpoint() const;

  // Serves until Stop() is called. Call from exactly one thread.
  void Run();

  // Makes Run() return soon. Callable from any thread and from a signal handler.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tutti::server
