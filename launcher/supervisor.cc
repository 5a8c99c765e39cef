#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

#include "launcher/output.h"

namespace tutti::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kGracePeriod = std::chrono::seconds(5);

// The exit status tuttirun reports for a rank, in the shell's convention.
int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string Describe(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(wait_status));
  }
  return "exited with status " + std::to_string(ExitCode(wait_status));
}

}  // namespace

class Supervisor::Impl {
 public:
  // `reset_limit`: in an elastic job, the rank failures the others survive (-1: any number;
  // without --min-np the first failure stops the job).
  Impl(std::vector<std::unique_ptr<RankProcess>>& ranks, int wake_read_fd, bool elastic,
       int reset_limit, Scaler* scaler)
      : ranks_(ranks),
        wake_fd_(wake_read_fd),
        elastic_(elastic),
        reset_limit_(reset_limit),
        scaler_(scaler) {}

  // The first reason to stop decides the exit code; later ones only add urgency.
  void BeginStop(int exit_code, int sig) {
    if (!stopping_) {
      stopping_ = true;
      exit_code_ = exit_code;
      kill_at_ = Clock::now() + kGracePeriod;
    }
    for (auto& r : ranks_) r->Signal(sig);
  }

  int Run() {
    while (!Done()) {
      std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
      std::vector<std::pair<RankProcess*, Stream>> owners{{nullptr, Stream::kOut}};
      for (auto& r : ranks_) {
        for (Stream s : {Stream::kOut, Stream::kErr}) {
          if (r->fd(s) < 0) continue;
          fds.push_back({r->fd(s), POLLIN, 0});
          owners.emplace_back(r.get(), s);
        }
      }
      if (::poll(fds.data(), fds.size(), PollTimeoutMs()) < 0 && errno != EINTR) {
        Say(std::string("poll: ") + std::strerror(errno));
        BeginStop(1, SIGKILL);
      }
      if (fds[0].revents) HandleSignals();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents) owners[i].first->ReadAvailable(owners[i].second, sink_);
      }
      ReapExited();
      if (scaler_ && !stopping_ && !Done() && Clock::now() >= scaler_->next_poll())
        scaler_->Poll(ranks_);
      if ((OutputClosed(STDOUT_FILENO) || OutputClosed(STDERR_FILENO)) && !stopping_) {
        // Like a shell pipeline: once the reader is gone, the writers go too.
        Say("output closed; stopping the ranks");
        BeginStop(128 + SIGPIPE, SIGTERM);
      }
      if (stopping_ && !killed_ && Clock::now() >= kill_at_) {
        for (auto& r : ranks_) {
          if (r->running()) Say("rank " + std::to_string(r->rank()) + " did not stop; killing it");
        }
        Escalate();
      }
    }
    if (elastic_ && !stopping_ && resets_ > 0) {
      // Ranks tuttirun stopped because their host went away neither failed nor succeeded.
      const bool any_succeeded = std::any_of(ranks_.begin(), ranks_.end(), [](const auto& r) {
        return !r->retired() && ExitCode(r->wait_status()) == 0;
      });
      if (!any_succeeded) {
        Say("every rank of the elastic job failed");
        return last_failure_;
      }
    }
    return exit_code_;
  }

 private:
  bool Done() const {
    for (auto& r : ranks_) {
      if (r->running() || r->streams_open()) return false;
    }
    return true;
  }

  int PollTimeoutMs() const {
    std::optional<Clock::time_point> until;
    if (stopping_ && !killed_) until = kill_at_;
    if (scaler_ && !stopping_) until = scaler_->next_poll();
    if (!until) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
  }

  void Escalate() {
    killed_ = true;
    for (auto& r : ranks_) r->Signal(SIGKILL);
  }

  void HandleSignals() {
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(wake_fd_, buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        const int sig = buf[i];
        if (sig == SIGCHLD) continue;  // ReapExited() runs on every iteration anyway
        if (stopping_) {
          // A second Ctrl-C means "now": do not make the user wait out the grace period.
          Say("received signal " + std::to_string(sig) + " again; killing the ranks");
          Escalate();
        } else {
          Say("received signal " + std::to_string(sig) + "; stopping the ranks");
          BeginStop(128 + sig, sig);
        }
      }
    }
  }

  void ReapExited() {
    for (auto& r : ranks_) {
      if (!r->running() || !r->TryReap()) continue;
      r->Drain(sink_);  // its output before our verdict on it
      const int status = r->wait_status();
      if (r->retired()) {
        Say("rank " + std::to_string(r->rank()) + " stopped (its host went away)");
        continue;
      }
      if (scaler_ && ExitCode(status) == 0) scaler_->Finished();
      if (stopping_ || ExitCode(status) == 0) continue;
      if (scaler_) scaler_->Failed(*r);
      bool others = false;
      for (auto& o : ranks_) others |= o->running();
      // An elastic job re-forms without it (tuttid ends the job below its minimum size); it
      // fails only past the reset limit, or when every rank failed (Run()).
      if (elastic_ && (reset_limit_ < 0 || resets_ < reset_limit_)) {
        ++resets_;
        last_failure_ = ExitCode(status);
        Say("rank " + std::to_string(r->rank()) + " " + Describe(status) +
            "; the elastic job goes on without it (failure " + std::to_string(resets_) +
            (reset_limit_ >= 0 ? " of at most " + std::to_string(reset_limit_) : "") + ")");
        continue;
      }
      Say("rank " + std::to_string(r->rank()) + " " + Describe(status) +
          (elastic_ ? "; the reset limit of " + std::to_string(reset_limit_) + " is reached" +
                          (others ? "; stopping the other ranks" : "")
           : others ? "; stopping the other ranks" : ""));
      BeginStop(ExitCode(status), SIGTERM);
    }
  }

  static void Forward(int rank, Stream s, std::string_view line) {
    // One write per line: tuttirun is the only writer, so lines never interleave.
    std::string out = LinePrefixes() ? "[" + std::to_string(rank) + "] " : std::string();
    out.append(line);
    out += '\n';
    WriteAll(s == Stream::kOut ? STDOUT_FILENO : STDERR_FILENO, out);
  }

  std::vector<std::unique_ptr<RankProcess>>& ranks_;
  int wake_fd_;
  const bool elastic_;
  const int reset_limit_;
  Scaler* const scaler_;
  int resets_ = 0;
  int last_failure_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  int exit_code_ = 0;
  Clock::time_point kill_at_{};
  const RankProcess::LineSink sink_ = Forward;
};

Supervisor::Supervisor(std::vector<std::unique_ptr<RankProcess>>& ranks, int wake_read_fd,
                       bool elastic, int reset_limit, Scaler* scaler)
    : impl_(std::make_unique<Impl>(ranks, wake_read_fd, elastic, reset_limit, scaler)) {}
Supervisor::~Supervisor() = default;
void Supervisor::BeginStop(int exit_code, int sig) { impl_->BeginStop(exit_code, sig); }
int Supervisor::Run() { return impl_->Run(); }

}  // namespace tutti::launcher
