// Coordinator: tuttid's event loop. One thread owns one ZeroMQ ROUTER socket and a
// CoordinatorCore; it decodes frames, feeds them to the core and sends what the core answers.
// Embeddable: tuttirun runs one on a thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tutti::server {

struct CoordinatorOptions {
  // ZeroMQ endpoint to bind; "tcp://127.0.0.1:*" lets the OS choose the port.
  std::string bind = "tcp://127.0.0.1:*";
  // Rendezvous deadline for a job whose ranks do not ask for one.
  int64_t rendezvous_timeout_ms = 60000;
  // Liveness (docs/failures.md): ranks send a heartbeat this often, and a rank silent for
  // `lease_ms` is declared lost; ranks likewise declare tuttid lost after `lease_ms` of silence.
  int64_t heartbeat_interval_ms = 1000;
  int64_t lease_ms = 5000;
  // Jobs served at once; registrations of further jobs are refused, bounding memory.
  int64_t max_jobs = 1024;
  // Stall inspector defaults for jobs whose ranks do not set their own (0: off): warn about
  // tensors some members submitted and others did not after this long, fail them after that.
  int64_t stall_warning_ms = 60000;
  int64_t stall_shutdown_ms = 0;
  // Where to write the negotiation timeline (Chrome trace JSON); empty: none.
  std::string timeline;
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
