// A child process for multi-process tests: stdin is a pipe the test writes commands to, stdout and
// stderr come back merged as lines. The destructor kills (SIGKILL) and reaps a child that is still
// running, so a failing test never leaves processes behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tutti::testing {

using Clock = std::chrono::steady_clock;

class Process {
 public:
  Process(std::vector<std::string> argv, const std::map<std::string, std::string>& env);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of output (without newline), or nullopt at end of output or at `deadline`.
  std::optional<std::string> ReadLine(Clock::time_point deadline);
  // Reads lines until one starts with `prefix`; returns the rest of that line, or nullopt.
  std::optional<std::string> ReadUntil(const std::string& prefix, Clock::time_point deadline);
  // Reads lines until one contains `text`; returns that line, or nullopt.
  std::optional<std::string> ReadUntilContaining(const std::string& text, Clock::time_point deadline);
  void WriteLine(const std::string& line);
  void Signal(int signal);
  // Waits for exit; returns the exit status (128+signal if killed), or nullopt at `deadline`.
  std::optional<int> Wait(Clock::time_point deadline);
  // Everything read so far, for failure messages.
  const std::string& transcript() const { return transcript_; }

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  std::string transcript_;
  std::optional<int> exit_status_;
};

// Deadline `seconds` from now; tests use generous ones so that a loaded 2-core machine passes.
inline Clock::time_point In(int seconds) { return Clock::now() + std::chrono::seconds(seconds); }

}  // namespace tutti::testing
