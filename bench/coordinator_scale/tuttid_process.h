// A real tuttid for the benchmark, and what /proc says about any process: CPU time (all threads,
// the main thread alone, ZeroMQ's background threads), resident memory, open descriptors.
// TuttidProcess owns its child: the destructor stops it (SIGTERM, then SIGKILL) and reaps it.
// Not thread-safe; the sampling functions are pure reads of /proc and may run on any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tutti::bench {

using Clock = std::chrono::steady_clock;

// One look at a process in /proc. CPU times are user + system, in seconds: each thread's time on
// a CPU from /proc/PID/task/TID/schedstat (nanoseconds), which is what utime + stime of
// /proc/PID/stat add up to but without their 10 ms ticks; stat's figure is kept as a cross-check.
struct ProcessSample {
  Clock::time_point at;
  double cpu_s = 0;       // every thread
  double stat_cpu_s = 0;  // /proc/PID/stat utime + stime (10 ms resolution)
  double loop_cpu_s = 0;  // the main thread: tuttid's event loop, which runs the core
  double zmq_cpu_s = 0;   // ZeroMQ's I/O and reaper threads ("ZMQbg/...")
  long rss_bytes = 0;     // VmRSS
  long peak_rss_bytes = 0;  // VmHWM
  int open_fds = 0;
};
ProcessSample SampleProcess(pid_t pid);
// Waits (up to `timeout`) until process `pid` holds at least `fds` descriptors and its RSS stopped
// moving: ZeroMQ accepts and handshakes connections on its own threads, after connect() returned.
ProcessSample AwaitSettled(pid_t pid, int fds, std::chrono::milliseconds timeout);

// What happened between two samples.
struct Usage {
  double wall_s = 0, cpu_s = 0, loop_cpu_s = 0, zmq_cpu_s = 0;
};
Usage Between(const ProcessSample& before, const ProcessSample& after);

class TuttidProcess {
 public:
  // Starts `program` listening on an OS-chosen loopback port, with `extra_args`; its stderr (its
  // log) goes to `log_path`. Throws std::runtime_error if it does not say where it listens.
  TuttidProcess(const std::string& program, const std::vector<std::string>& extra_args,
                const std::string& log_path);
  ~TuttidProcess();
  TuttidProcess(const TuttidProcess&) = delete;
  TuttidProcess& operator=(const TuttidProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& endpoint() const { return endpoint_; }
  ProcessSample Sample() const { return SampleProcess(pid_); }
  ProcessSample AwaitSettled(int fds, std::chrono::milliseconds timeout) const {
    return bench::AwaitSettled(pid_, fds, timeout);
  }
  // Stops tuttid (SIGTERM); its exit status, or -1 if it had to be killed.
  int Stop();

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
  bool stopped_ = false;
};

// Raises this process's open-file limit to its hard limit (children inherit it): every simulated
// rank holds a TCP connection and an eventfd, and tuttid one descriptor per rank.
void RaiseFileLimit();
// This process's open-file limit (soft).
long FileLimit();

}  // namespace tutti::bench
