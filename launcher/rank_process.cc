#include "launcher/rank_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "launcher/ssh_command.h"

namespace tutti::launcher {
namespace {

[[noreturn]] void ThrowErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

void CloseFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// Between fork and exec only async-signal-safe calls are allowed: the coordinator's threads may
// have held locks (malloc's included) at the moment of the fork.
void WriteAll(int fd, const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int in, int out, int err,
                            const cpu_set_t* cpus) {
  if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0) {
    _exit(127);
  }
  if (cpus != nullptr && ::sched_setaffinity(0, sizeof(*cpus), cpus) != 0) {
    const char* reason = strerrordesc_np(errno);
    WriteAll(STDERR_FILENO, "tuttirun: cannot bind the rank to its CPUs: ");
    WriteAll(STDERR_FILENO, reason ? reason : "unknown error");
    WriteAll(STDERR_FILENO, "\n");
    _exit(127);
  }
  // Signals are blocked here (see Start). tuttirun's handlers must go before they are unblocked:
  // a SIGTERM meant for this rank would otherwise run tuttirun's handler in the child and be
  // taken for a signal to tuttirun. Dispositions tuttirun inherited as ignored stay ignored,
  // except SIGPIPE, which tuttirun ignores for itself.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction cur {};
    if (::sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler != SIG_DFL &&
        (cur.sa_handler != SIG_IGN || sig == SIGPIPE)) {
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);

  ::execvpe(argv[0], argv, envp);

  const int e = errno;
  const char* reason = strerrordesc_np(e);  // unlike strerror, never allocates
  WriteAll(STDERR_FILENO, "tuttirun: cannot execute '");
  WriteAll(STDERR_FILENO, argv[0]);
  WriteAll(STDERR_FILENO, "': ");
  WriteAll(STDERR_FILENO, reason ? reason : "unknown error");
  WriteAll(STDERR_FILENO, "\n");
  _exit(127);
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

RankProcess::~RankProcess() {
  // A remote rank's end of file stops the remote program (its wrapper sees it once ssh is gone);
  // ssh itself is killed here, not asked.
  CloseFd(control_fd_);
  if (running()) {
    ::kill(pid_, SIGKILL);
    Reap();
  }
  CloseFd(fds_[0]);
  CloseFd(fds_[1]);
}

void RankProcess::Start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        const cpu_set_t* cpus) {
  Launch(argv, env, cpus, -1);
}

void RankProcess::StartRemote(const std::vector<std::string>& ssh_argv,
                              const std::vector<std::string>& env) {
  int control[2];
  if (::pipe2(control, O_CLOEXEC) < 0) ThrowErrno("pipe");
  try {
    Launch(ssh_argv, env, nullptr, control[0]);
  } catch (...) {
    ::close(control[0]);
    ::close(control[1]);
    throw;
  }
  ::close(control[0]);
  // Non-blocking: a few short lines never fill the pipe, and tuttirun must never wait on ssh.
  ::fcntl(control[1], F_SETFL, ::fcntl(control[1], F_GETFL) | O_NONBLOCK);
  control_fd_ = control[1];
  remote_ = true;
}

void RankProcess::Launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const cpu_set_t* cpus, int stdin_fd) {
  // Everything the child needs is built before fork, so the child does not allocate.
  std::vector<char*> cargv = CStrings(argv);
  std::vector<char*> cenv = CStrings(env);

  // O_CLOEXEC everywhere: a rank must not inherit another rank's pipe ends, or that rank's
  // streams would not reach EOF until both had exited.
  int child_stdin = stdin_fd >= 0 ? ::fcntl(stdin_fd, F_DUPFD_CLOEXEC, 0)
                                   : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (child_stdin < 0) ThrowErrno(stdin_fd >= 0 ? "dup" : "open /dev/null");
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) {
    const int e = errno;
    for (int fd : {child_stdin, out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    errno = e;
    ThrowErrno("pipe");
  }

  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(cargv.data(), cenv.data(), child_stdin, out[1], err[1], cpus);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(child_stdin);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    errno = fork_errno;
    ThrowErrno("fork");
  }

  pid_ = pid;
  fds_[0] = out[0];
  fds_[1] = err[0];
  for (int fd : fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

bool RankProcess::ReadAvailable(Stream s, const LineSink& sink) {
  const int i = Index(s);
  if (fds_[i] < 0) return false;
  std::string& buf = partial_[i];
  char chunk[65536];
  ssize_t n;
  do {
    n = ::read(fds_[i], chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    // EOF, or an error that EOF is the only sensible reading of.
    if (!buf.empty()) {
      std::string last;
      last.swap(buf);
      sink(rank_, s, last);
    }
    CloseFd(fds_[i]);
    return false;
  }
  buf.append(chunk, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    sink(rank_, s, std::string_view(buf).substr(start, nl - start));
  }
  buf.erase(0, start);
  if (buf.size() >= kMaxLine) {
    std::string line;
    line.swap(buf);
    sink(rank_, s, line);
  }
  return true;
}

void RankProcess::Drain(const LineSink& sink) {
  for (Stream s : {Stream::kOut, Stream::kErr}) {
    const int i = Index(s);
    // Bounded: a pipe holds at most 1 MiB unless resized, but a background process the rank
    // left behind could keep writing forever.
    for (int reads = 0; reads < 64 && ReadAvailable(s, sink); ++reads) {
    }
    if (fds_[i] >= 0) {
      if (!partial_[i].empty()) {
        std::string last;
        last.swap(partial_[i]);
        sink(rank_, s, last);
      }
      CloseFd(fds_[i]);
    }
  }
}

void RankProcess::Signal(int sig) {
  if (!running()) return;
  if (!remote_) {
    ::kill(pid_, sig);
    return;
  }
  if (control_fd_ < 0) return;  // already told KILL
  std::string name = WrapperSignalName(sig);
  if (name.empty()) name = "TERM";
  name += '\n';
  // A failed write (ssh already gone: EPIPE, which tuttirun ignores as a signal) changes
  // nothing: ssh is ending and will be reaped.
  (void)!::write(control_fd_, name.data(), name.size());
  if (sig == SIGKILL) CloseFd(control_fd_);
}

bool RankProcess::TryReap() {
  if (!running()) return reaped_;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_) {
      reaped_ = true;
      wait_status_ = status;
      CloseFd(control_fd_);
    } else if (r < 0) {
      // ECHILD: someone else reaped it; nothing is left to wait for.
      reaped_ = true;
      wait_status_ = 0;
    }
    return reaped_;
  }
}

void RankProcess::Reap() {
  while (running()) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    reaped_ = true;
    wait_status_ = r == pid_ ? status : 0;
  }
  CloseFd(control_fd_);
}

}  // namespace tutti::launcher
