#include "multiproc/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tutti::testing {
namespace {

int StatusFromWait(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return 128 + WTERMSIG(raw);
  return -1;
}

int MsUntil(Clock::time_point deadline) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : (ms > INT_MAX ? INT_MAX : static_cast<int>(ms));
}

}  // namespace

Process::Process(std::vector<std::string> argv, const std::map<std::string, std::string>& env) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  // Build everything the child needs before fork: only async-signal-safe calls after it.
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
}

Process::~Process() {
  if (!exit_status_) {
    kill(pid_, SIGKILL);
    int raw = 0;
    while (waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
  }
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> Process::ReadLine(Clock::time_point deadline) {
  while (true) {
    auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    pollfd fd{stdout_fd_, POLLIN, 0};
    int ready = poll(&fd, 1, MsUntil(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(stdout_fd_);
      stdout_fd_ = -1;
      if (buffer_.empty()) return std::nullopt;
      buffer_ += '\n';
      continue;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    transcript_.append(chunk, static_cast<size_t>(n));
  }
}

std::optional<std::string> Process::ReadUntil(const std::string& prefix, Clock::time_point deadline) {
  while (auto line = ReadLine(deadline))
    if (line->compare(0, prefix.size(), prefix) == 0) return line->substr(prefix.size());
  return std::nullopt;
}

std::optional<std::string> Process::ReadUntilContaining(const std::string& text,
                                                        Clock::time_point deadline) {
  while (auto line = ReadLine(deadline))
    if (line->find(text) != std::string::npos) return line;
  return std::nullopt;
}

void Process::WriteLine(const std::string& line) {
  std::string text = line + "\n";
  [[maybe_unused]] ssize_t n = write(stdin_fd_, text.data(), text.size());
}

void Process::Signal(int signal) {
  if (!exit_status_) kill(pid_, signal);
}

std::optional<int> Process::Wait(Clock::time_point deadline) {
  // Drain output meanwhile so a chatty child never blocks on a full pipe.
  while (!exit_status_) {
    int raw = 0;
    pid_t done = waitpid(pid_, &raw, WNOHANG);
    if (done == pid_) {
      exit_status_ = StatusFromWait(raw);
      break;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    if (stdout_fd_ >= 0) {
      ReadLine(std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling waitpid, not syncing
    }
  }
  while (stdout_fd_ >= 0 && ReadLine(Clock::now() + std::chrono::seconds(5))) {
  }
  return exit_status_;
}

}  // namespace tutti::testing
