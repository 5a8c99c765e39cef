// RankProcess: one rank's child process and the two pipes carrying its stdout and stderr.
// tuttirun owns one per rank and drives them all from a single poll() loop, so nothing here
// blocks except Reap(). A rank on another host is a local `ssh` child started with
// StartRemote(): it also owns the pipe to ssh's stdin, through which the rank is signalled
// (launcher/ssh_command.h).
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tutti::launcher {

enum class Stream { kOut = 0, kErr = 1 };

class RankProcess {
 public:
  // Receives one complete line of the given rank, without its '\n'.
  using LineSink = std::function<void(int rank, Stream, std::string_view line)>;

  // `host`: the host it runs for (elastic tuttirun's discovered hosts; empty otherwise).
  explicit RankProcess(int rank, std::string host = "") : rank_(rank), host_(std::move(host)) {}
  // A process still running here means tuttirun is bailing out: kill and reap it so that no
  // path leaves a zombie or an orphan behind.
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  // Forks and execs argv[0] (PATH lookup) with `env` as its whole environment ("KEY=VALUE").
  // stdin is /dev/null; `cpus`, when given, the only CPUs it may run on (tuttirun --bind-to).
  // Throws std::system_error if the pipes or the fork fail; a failing exec (or binding) shows up
  // as a message on the rank's stderr and exit status 127, like a shell's.
  void Start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const cpu_set_t* cpus = nullptr);

  // Starts `ssh_argv` (SshArgv of a RemoteRankCommand) with `env` as ssh's environment and a
  // pipe as its stdin, kept open for Signal(): the remote wrapper takes a line naming a signal
  // for the rank, and end of file for TERM, then KILL 5 s later. Throws as Start does.
  void StartRemote(const std::vector<std::string>& ssh_argv, const std::vector<std::string>& env);
  bool remote() const { return remote_; }

  int rank() const { return rank_; }
  const std::string& host() const { return host_; }
  // Stopped by tuttirun with `sig` because its host went away: its exit is no failure.
  void Retire(int sig) {
    retired_ = true;
    Signal(sig);
  }
  bool retired() const { return retired_; }
  pid_t pid() const { return pid_; }

  // -1 once the stream reached EOF or was closed.
  int fd(Stream s) const { return fds_[Index(s)]; }
  bool streams_open() const { return fds_[0] >= 0 || fds_[1] >= 0; }

  // One non-blocking read; complete lines go to sink. At EOF the trailing partial line, if any,
  // goes too and the pipe is closed. Returns whether it read data, i.e. more may be waiting.
  // Only one read, so that a rank writing without pause cannot starve the other ranks or
  // tuttirun's handling of signals and exits: poll() brings us back.
  bool ReadAvailable(Stream s, const LineSink& sink);

  // Reads both pipes until they are empty, flushes partial lines and closes them. Used once the
  // rank has been reaped: everything it wrote is in the pipes by then, and waiting for EOF could
  // hang forever if it left a background process holding the write ends.
  void Drain(const LineSink& sink);

  // Sends sig unless the child has already been reaped (its pid may belong to someone else). A
  // remote rank gets it through ssh's stdin (INT, TERM or KILL; a signal the wrapper does not
  // know becomes TERM), and after KILL the pipe is closed, which stops the rank even if the line
  // is lost; ssh then ends with the remote program, or within 30 s of a dead connection.
  void Signal(int sig);

  // Non-blocking waitpid; true once the child has been reaped (now or earlier).
  bool TryReap();
  // Blocking waitpid.
  void Reap();

  bool running() const { return pid_ > 0 && !reaped_; }
  bool reaped() const { return reaped_; }
  // The raw waitpid status; meaningful once reaped().
  int wait_status() const { return wait_status_; }

 private:
  static int Index(Stream s) { return static_cast<int>(s); }
  // `stdin_fd`: the child's stdin; -1 for /dev/null.
  void Launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const cpu_set_t* cpus, int stdin_fd);

  // A partial line longer than this is handed over as if it ended, so that a rank printing
  // without newlines cannot make tuttirun's memory grow without bound.
  static constexpr size_t kMaxLine = 1 << 20;

  int rank_;
  std::string host_;
  bool retired_ = false;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int wait_status_ = 0;
  int fds_[2] = {-1, -1};
  std::string partial_[2];
  bool remote_ = false;
  int control_fd_ = -1;  // a remote rank's pipe to ssh's stdin; -1 once closed
};

}  // namespace tutti::launcher
