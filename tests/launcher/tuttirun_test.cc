// End-to-end tests of tuttirun: real processes, real pipes, real signals. Rank programs are
// `sh -c` scripts. Ordering between ranks is arranged with FIFOs, never with sleeps; the only
// clock involved is a watchdog that kills a hung tuttirun (and its ranks) so a failing test
// cannot leave processes behind. The test process is a child subreaper, so any rank tuttirun
// fails to reap, or leaves running, becomes our child: we notice it, and kill and reap it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef TUTTIRUN_PATH
#error "TUTTIRUN_PATH must name the tuttirun binary"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// No test needs a coordinator except the one that checks the embedded one; this address is
// never contacted because the rank programs ignore it.
const char kNoCoordinator[] = "tcp://127.0.0.1:1";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool Contains(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// One tuttirun child with its stdout and stderr captured. tuttirun runs in a process group of
// its own, which its ranks share, so the watchdog and the destructor can kill all of them.
class Tuttirun {
 public:
  explicit Tuttirun(const std::vector<std::string>& args, std::chrono::seconds watchdog = 60s)
      : started_(Clock::now()) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    std::vector<std::string> argv{TUTTIRUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      // The test runner may have been started with these ignored (a background job of a
      // script); ranks would then inherit that and the signal tests would test nothing.
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execv(cargv[0], cargv.data());
      _exit(126);
    }
    ::setpgid(pid_, pid_);  // also here: whichever runs first, the group exists before we kill it
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];

    watchdog_ = std::thread([this, watchdog] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, watchdog, [this] { return reaped_; })) {
        timed_out_ = true;
        ::kill(-pid_, SIGKILL);
      }
    });
  }

  ~Tuttirun() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Killing the group before reaping its leader: the group id cannot be reused meanwhile.
      if (!reaped_) ::kill(-pid_, SIGKILL);
    }
    Reap();
    ReapOrphans(/*expect_none=*/false);
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    watchdog_.join();
  }

  Tuttirun(const Tuttirun&) = delete;
  Tuttirun& operator=(const Tuttirun&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& out() const { return text_[0]; }
  const std::string& err() const { return text_[1]; }

  // Reads until done() holds or both streams end; returns done().
  bool ReadUntil(const std::function<bool()>& done) {
    while (!done()) {
      if (!ReadSome()) return done();
    }
    return true;
  }

  // Reads everything, reaps tuttirun, returns its exit code (128+N for signal N; -1 if the
  // watchdog had to kill it).
  int Wait() {
    while (ReadSome()) {
    }
    Reap();
    elapsed_ = Clock::now() - started_;
    ReapOrphans(/*expect_none=*/!timed_out_);
    if (timed_out_) return -1;
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -2;
  }

  // Like `tuttirun ... | head`: stops reading tuttirun's stdout.
  void CloseStdout() {
    ::close(fds_[0]);
    fds_[0] = -1;
  }

  double seconds() const { return std::chrono::duration<double>(elapsed_).count(); }

 private:
  bool ReadSome() {
    pollfd p[2];
    int n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      p[n] = {fds_[i], POLLIN, 0};
      which[n++] = i;
    }
    if (n == 0) return false;
    if (::poll(p, n, -1) < 0) return errno == EINTR;
    for (int k = 0; k < n; ++k) {
      if (!p[k].revents) continue;
      char buf[65536];
      ssize_t r = ::read(fds_[which[k]], buf, sizeof buf);
      if (r > 0) {
        text_[which[k]].append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        ::close(fds_[which[k]]);
        fds_[which[k]] = -1;
      }
    }
    return true;
  }

  void Reap() {
    std::unique_lock<std::mutex> lock(mu_);
    if (reaped_) return;
    lock.unlock();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    lock.lock();
    status_ = status;
    reaped_ = true;
    cv_.notify_all();
  }

  // Once tuttirun is reaped, whatever it started and did not reap has been handed to us.
  void ReapOrphans(bool expect_none) {
    int status = 0;
    const pid_t r = ::waitpid(-1, &status, WNOHANG);
    if (r < 0) return;  // ECHILD: nothing was left behind
    if (expect_none) {
      ADD_FAILURE() << "tuttirun left process " << (r > 0 ? std::to_string(r) : "(running)")
                    << " behind";
    }
    ::kill(-pid_, SIGKILL);  // what is left still belongs to tuttirun's group
    while (::waitpid(-1, &status, 0) > 0 || errno == EINTR) {
    }
  }

  Clock::time_point started_;
  Clock::duration elapsed_{};
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string text_[2];
  int status_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool reaped_ = false;
  bool timed_out_ = false;
  std::thread watchdog_;
};

// A scratch directory with a FIFO in it, for making one rank wait for another.
class Fifo {
 public:
  Fifo() {
    char tmpl[] = "/tmp/tuttirun_test.XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir_ = tmpl;
    path_ = dir_ + "/fifo";
    if (::mkfifo(path_.c_str(), 0600) != 0) std::abort();
  }
  ~Fifo() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

TEST(Tuttirun, PrefixesEachRanksStdout) {
  Tuttirun run({"-np", "3", "--coordinator", kNoCoordinator, "sh", "-c", "echo hello $TUTTI_RANK"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  auto lines = Lines(run.out());
  EXPECT_EQ(lines.size(), 3u) << run.out();
  EXPECT_TRUE(Contains(lines, "[0] hello 0")) << run.out();
  EXPECT_TRUE(Contains(lines, "[1] hello 1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[2] hello 2")) << run.out();
}

TEST(Tuttirun, PrefixesEachRanksStderr) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "echo oops $TUTTI_RANK >&2"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  EXPECT_EQ(run.out(), "");
  auto lines = Lines(run.err());
  EXPECT_TRUE(Contains(lines, "[0] oops 0")) << run.err();
  EXPECT_TRUE(Contains(lines, "[1] oops 1")) << run.err();
}

TEST(Tuttirun, FlushesATrailingPartialLine) {
  Tuttirun run({"-np", "1", "--coordinator", kNoCoordinator, "sh", "-c",
                "printf 'first\\nno newline'; printf 'err tail' >&2"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  EXPECT_EQ(run.out(), "[0] first\n[0] no newline\n");
  EXPECT_EQ(run.err(), "[0] err tail\n");
}

// Four ranks writing many lines at once, plus one line longer than a pipe's buffer: every line
// must come out whole, with its own rank's prefix, in that rank's order.
TEST(Tuttirun, NeverInterleavesLines) {
  const int kLines = 2000;
  Tuttirun run({"-np", "4", "--coordinator", kNoCoordinator, "sh", "-c",
                "i=0; while [ $i -lt " + std::to_string(kLines) +
                    " ]; do echo \"rank $TUTTI_RANK line $i 0123456789abcdefghijklmnop\"; "
                    "i=$((i+1)); done; head -c 200000 /dev/zero | tr '\\0' x; echo"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  const std::regex line_re(R"(\[(\d)\] rank (\d) line (\d+) 0123456789abcdefghijklmnop)");
  const std::string long_line(200000, 'x');
  std::map<int, int> next;
  std::map<int, int> long_lines;
  for (const auto& line : Lines(run.out())) {
    if (line.size() > 1000) {  // keep std::regex away from the long line
      ASSERT_EQ(line.size(), long_line.size() + 4) << line.substr(0, 80);
      ASSERT_EQ(line.compare(0, 1, "["), 0);
      ASSERT_EQ(line.compare(4, std::string::npos, long_line), 0);
      ++long_lines[line[1] - '0'];
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << line;
    ASSERT_EQ(m[1], m[2]) << line;
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[3]), next[rank]) << line;
    ++next[rank];
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(next[rank], kLines) << "rank " << rank;
    EXPECT_EQ(long_lines[rank], 1) << "rank " << rank;
  }
}

TEST(Tuttirun, SetsTheRankEnvironment) {
  ::setenv("TUTTI_RANK", "99", 1);  // an inherited value must be replaced, not duplicated
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "--job", "myjob", "sh", "-c",
                "echo $TUTTI_RANK $TUTTI_SIZE $TUTTI_JOB $TUTTI_COORDINATOR; "
                "env | grep -c '^TUTTI_RANK='; "
                "echo horovod $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE "
                "$HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE"});
  const int code = run.Wait();
  ::unsetenv("TUTTI_RANK");
  ASSERT_EQ(code, 0) << run.err();
  auto lines = Lines(run.out());
  EXPECT_TRUE(Contains(lines, "[0] 0 2 myjob tcp://127.0.0.1:1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[1] 1 2 myjob tcp://127.0.0.1:1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[0] 1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[1] 1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[0] horovod 0 2 0 2 0 1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[1] horovod 1 2 1 2 0 1")) << run.out();
}

// Returns rank -> "TUTTI_JOB TUTTI_TOKEN" for one two-rank run.
std::map<std::string, std::string> JobAndToken() {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "echo $TUTTI_JOB $TUTTI_TOKEN"});
  EXPECT_EQ(run.Wait(), 0) << run.err();
  std::map<std::string, std::string> by_rank;
  for (const auto& line : Lines(run.out())) by_rank[line.substr(0, 3)] = line.substr(4);
  return by_rank;
}

TEST(Tuttirun, TokenAndJobAreSharedWithinARunAndFreshAcrossRuns) {
  auto first = JobAndToken();
  auto second = JobAndToken();
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(first["[0]"], first["[1]"]);
  EXPECT_EQ(second["[0]"], second["[1]"]);
  const std::regex re("tuttirun-[0-9a-f]+ [0-9a-f]{32}");
  EXPECT_TRUE(std::regex_match(first["[0]"], re)) << first["[0]"];
  EXPECT_TRUE(std::regex_match(second["[0]"], re)) << second["[0]"];
  const auto job = [](const std::string& s) { return s.substr(0, s.find(' ')); };
  const auto token = [](const std::string& s) { return s.substr(s.find(' ') + 1); };
  EXPECT_NE(job(first["[0]"]), job(second["[0]"]));
  EXPECT_NE(token(first["[0]"]), token(second["[0]"]));
}

TEST(Tuttirun, EmbeddedCoordinatorEndpointIsPassedToRanks) {
  Tuttirun run({"-np", "2", "sh", "-c", "echo $TUTTI_COORDINATOR"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  auto lines = Lines(run.out());
  ASSERT_EQ(lines.size(), 2u) << run.out();
  const std::string prefix = "tcp://127.0.0.1:";
  EXPECT_EQ(lines[0].substr(4, prefix.size()), prefix) << lines[0];
  EXPECT_GT(lines[0].size(), 4 + prefix.size()) << "no port: " << lines[0];
  EXPECT_EQ(lines[0].substr(4), lines[1].substr(4));
}

TEST(Tuttirun, PassesArgumentsWithLeadingDashesThrough) {
  Tuttirun run({"-np", "1", "--coordinator", kNoCoordinator, "sh", "-c",
                "printf '<%s>\\n' \"$@\"", "argv0", "-np", "5", "--help", "-x", "--", "",
                "--coordinator=y"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  EXPECT_EQ(run.out(), "[0] <-np>\n[0] <5>\n[0] <--help>\n[0] <-x>\n[0] <-->\n[0] <>\n"
                       "[0] <--coordinator=y>\n");
}

TEST(Tuttirun, NoPrefixPassesLinesThroughAndOptionValuesAreNotTheProgram) {
  // -np after an option that takes a value is still tuttirun's.
  Tuttirun run({"--no-prefix", "--log-level", "warn", "--coordinator-timeline", "/dev/null", "-np",
                "2", "--coordinator", kNoCoordinator, "sh", "-c", "echo line $TUTTI_RANK"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  auto lines = Lines(run.out());
  EXPECT_EQ(lines.size(), 2u) << run.out();
  EXPECT_TRUE(Contains(lines, "line 0")) << run.out();
  EXPECT_TRUE(Contains(lines, "line 1")) << run.out();
}

TEST(Tuttirun, DoubleDashSeparatesTheProgram) {
  Tuttirun run({"--np", "1", "--coordinator", kNoCoordinator, "--", "sh", "-c", "echo ok"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  EXPECT_EQ(run.out(), "[0] ok\n");
}

TEST(Tuttirun, FailingRankStopsTheJobWithItsStatus) {
  Tuttirun run({"-np", "3", "--coordinator", kNoCoordinator, "sh", "-c",
                "if [ \"$TUTTI_RANK\" = 1 ]; then exit 3; fi; exec sleep 60"});
  EXPECT_EQ(run.Wait(), 3) << run.err();
  EXPECT_LT(run.seconds(), 30.0);
  EXPECT_NE(run.err().find("tuttirun: rank 1 exited with status 3; stopping the other ranks\n"),
            std::string::npos)
      << run.err();
}

TEST(Tuttirun, RankKilledBySignalGives128PlusSignal) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "if [ \"$TUTTI_RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60"});
  EXPECT_EQ(run.Wait(), 128 + SIGKILL) << run.err();
  EXPECT_LT(run.seconds(), 30.0);
  EXPECT_NE(run.err().find("tuttirun: rank 0 was killed by signal 9"), std::string::npos)
      << run.err();
}

// The surviving rank's pid is known before the failure happens (rank 1 waits on the FIFO for
// rank 0 to have printed it), so we can check it is gone once tuttirun has returned.
TEST(Tuttirun, NoRankOutlivesAFailure) {
  Fifo fifo;
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "if [ \"$TUTTI_RANK\" = 0 ]; then echo pid $$; echo go > " + fifo.path() +
                    "; exec sleep 60; else read x < " + fifo.path() + "; exit 7; fi"});
  EXPECT_EQ(run.Wait(), 7) << run.err();
  auto lines = Lines(run.out());
  ASSERT_EQ(lines.size(), 1u) << run.out();
  ASSERT_EQ(lines[0].rfind("[0] pid ", 0), 0u) << lines[0];
  const pid_t survivor = std::stoi(lines[0].substr(8));
  EXPECT_EQ(::kill(survivor, 0), -1) << "rank 0 (pid " << survivor << ") is still there";
  EXPECT_EQ(errno, ESRCH);
}

// A rank that ignores SIGTERM is killed once the grace period is over.
TEST(Tuttirun, RankIgnoringSigtermIsKilledAfterGracePeriod) {
  Fifo fifo;
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "if [ \"$TUTTI_RANK\" = 0 ]; then trap '' TERM; echo go > " + fifo.path() +
                    "; exec sleep 60; else read x < " + fifo.path() + "; exit 5; fi"});
  EXPECT_EQ(run.Wait(), 5) << run.err();
  EXPECT_GE(run.seconds(), 4.0);  // the grace period is 5 s
  EXPECT_LT(run.seconds(), 30.0);
  EXPECT_NE(run.err().find("rank 0 did not stop; killing it"), std::string::npos) << run.err();
}

void ExpectSignalIsForwarded(int sig) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "sh", "-c",
                "echo ready; exec sleep 60"});
  ASSERT_TRUE(run.ReadUntil([&] {
    return run.out().find("[0] ready\n") != std::string::npos &&
           run.out().find("[1] ready\n") != std::string::npos;
  })) << run.out() << run.err();
  ASSERT_EQ(::kill(run.pid(), sig), 0);
  EXPECT_EQ(run.Wait(), 128 + sig) << run.err();
  EXPECT_LT(run.seconds(), 30.0);
  EXPECT_NE(run.err().find("received signal " + std::to_string(sig)), std::string::npos)
      << run.err();
  // Stopping because we were asked to is not a rank failure.
  EXPECT_EQ(run.err().find("exited with status"), std::string::npos) << run.err();
}

TEST(Tuttirun, ForwardsSigint) { ExpectSignalIsForwarded(SIGINT); }
TEST(Tuttirun, ForwardsSigterm) { ExpectSignalIsForwarded(SIGTERM); }

// A shell pipeline ends when its reader goes away; so does a job whose output nobody reads.
TEST(Tuttirun, ClosedStdoutStopsTheRanks) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "yes"});
  ASSERT_TRUE(run.ReadUntil([&] { return run.out().find('\n') != std::string::npos; }));
  run.CloseStdout();
  EXPECT_EQ(run.Wait(), 128 + SIGPIPE) << run.err();
  EXPECT_LT(run.seconds(), 30.0);
  EXPECT_NE(run.err().find("output closed; stopping the ranks"), std::string::npos) << run.err();
}

TEST(Tuttirun, ProgramThatCannotBeExecutedGives127) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "/nonexistent/program"});
  EXPECT_EQ(run.Wait(), 127) << run.err();
  EXPECT_NE(run.err().find("cannot execute '/nonexistent/program'"), std::string::npos)
      << run.err();
}

// ---- CPU binding (--bind-to) ----

// The cores this test may run on, as tuttirun counts them: distinct (socket, core) pairs of the
// allowed CPUs.
int AllowedCores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const auto read = [cpu](const char* file) {
      std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + file);
      int id = -1;
      return (in >> id) ? id : -1;
    };
    const int core = read("core_id");
    cores.insert(core < 0 ? std::make_pair(-1, cpu) : std::make_pair(read("physical_package_id"), core));
  }
  return static_cast<int>(cores.size());
}

std::string OwnCpus() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 18));
  return "";
}

// rank -> its Cpus_allowed_list, from a run whose ranks print their /proc/self/status line.
std::map<int, std::string> RankCpus(const std::string& out) {
  std::map<int, std::string> cpus;
  static const std::regex line(R"(\[(\d+)\] Cpus_allowed_list:\s*(\S+))");
  for (const auto& text : Lines(out)) {
    std::smatch m;
    if (std::regex_match(text, m, line)) cpus[std::stoi(m[1])] = m[2];
  }
  return cpus;
}

const char kPrintCpus[] = "grep Cpus_allowed_list /proc/self/status";

TEST(Tuttirun, BindsEachRankToACoreOfItsOwnWhenTheyFit) {
  if (AllowedCores() < 2) GTEST_SKIP() << "needs 2 cores, this machine lets the test use " << AllowedCores();
  for (const char* policy : {"auto", "core"}) {
    Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "--bind-to", policy,
                  "--report-bindings", "sh", "-c", kPrintCpus});
    ASSERT_EQ(run.Wait(), 0) << run.err();
    const auto cpus = RankCpus(run.out());
    ASSERT_EQ(cpus.size(), 2u) << run.out();
    EXPECT_NE(cpus.at(0), cpus.at(1)) << policy;
    EXPECT_NE(cpus.at(0), OwnCpus()) << policy;
    const auto lines = Lines(run.err());
    for (int rank : {0, 1}) {
      EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
        return l.rfind("tuttirun: rank " + std::to_string(rank) + " bound to core ", 0) == 0 &&
               l.find("(CPU") != std::string::npos;
      })) << run.err();
    }
  }
}

TEST(Tuttirun, LeavesAnOversubscribedJobUnboundByDefault) {
  const int np = AllowedCores() + 1;
  Tuttirun run({"-np", std::to_string(np), "--coordinator", kNoCoordinator, "--report-bindings",
                "sh", "-c", kPrintCpus});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  const auto cpus = RankCpus(run.out());
  ASSERT_EQ(static_cast<int>(cpus.size()), np) << run.out();
  for (const auto& [rank, list] : cpus) EXPECT_EQ(list, OwnCpus()) << "rank " << rank;
  EXPECT_TRUE(Contains(Lines(run.err()), "tuttirun: rank 0 is not bound")) << run.err();
  Tuttirun none({"-np", "2", "--coordinator", kNoCoordinator, "--bind-to", "none", "sh", "-c", kPrintCpus});
  ASSERT_EQ(none.Wait(), 0) << none.err();
  for (const auto& [rank, list] : RankCpus(none.out())) EXPECT_EQ(list, OwnCpus()) << "rank " << rank;
}

TEST(Tuttirun, RefusesABindingItCannotMeet) {
  const int cores = AllowedCores();
  Tuttirun run({"-np", std::to_string(cores + 1), "--coordinator", kNoCoordinator, "--bind-to",
                "core", "true"});
  EXPECT_EQ(run.Wait(), 2);
  EXPECT_EQ(run.err(), "tuttirun: --bind-to core: " + std::to_string(cores + 1) +
                           " local ranks but only " + std::to_string(cores) + " core" +
                           (cores == 1 ? "" : "s") +
                           " available to tuttirun; give --bind-to none or fewer ranks\n");
  Tuttirun elastic({"--min-np", "1", "--host-discovery-script", "echo localhost:2", "--bind-to",
                    "core", "true"});
  EXPECT_EQ(elastic.Wait(), 2);
  EXPECT_EQ(elastic.err(),
            "tuttirun: --bind-to core: the ranks of a --host-discovery-script job come and go; "
            "bind them with --bind-to socket or none\nRun with --help for more information.\n");
}

TEST(Tuttirun, RanksShareTheSocketTheyAreBoundTo) {
  cpu_set_t set;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  std::set<int> sockets;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/physical_package_id");
    int id = -1;
    sockets.insert((in >> id) ? id : -1 - cpu);
  }
  const int n = static_cast<int>(sockets.size());
  Tuttirun run({"-np", std::to_string(n + 1), "--coordinator", kNoCoordinator, "--bind-to",
                "socket", "sh", "-c", kPrintCpus});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  const auto cpus = RankCpus(run.out());
  ASSERT_EQ(static_cast<int>(cpus.size()), n + 1) << run.out();
  EXPECT_EQ(cpus.at(0), cpus.at(n)) << "rank " << n << " shares rank 0's socket\n" << run.out();
  if (n == 1) EXPECT_EQ(cpus.at(0), OwnCpus()) << "one socket: all of it";
}

TEST(Tuttirun, HelpExitsZero) {
  Tuttirun run({"--help"});
  EXPECT_EQ(run.Wait(), 0) << run.err();
  EXPECT_NE(run.out().find("--np"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("--coordinator"), std::string::npos) << run.out();
}

TEST(Tuttirun, InvalidUsageExitsTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},                                          // nothing at all
      {"-np", "2"},                                // no program
      {"-np", "0", "true"},                        // no ranks
      {"-np", "-3", "true"},                       // negative
      {"-np", "two", "true"},                      // not a number
      {"true"},                                    // no -np
      {"-np", "2", "--no-such-option", "true"},    // typo must not become the program
      {"-np", "2", "--bind-to", "board", "true"},  // a binding mpirun has and tuttirun has not
  };
  for (const auto& args : cases) {
    Tuttirun run(args);
    EXPECT_EQ(run.Wait(), 2) << "args: " << ::testing::PrintToString(args) << "\n" << run.err();
    EXPECT_FALSE(run.err().empty());
  }
}

}  // namespace

namespace {

// ---- across hosts: what needs no ssh (tests/python/test_ssh_hosts.py has real sshds) ----

// tuttirun's whole stderr for a usage error.
std::string Usage(const std::string& problem) {
  return "tuttirun: " + problem + "\nRun with --help for more information.\n";
}

TEST(TuttirunHosts, UsageErrorsSayWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-H", "a:2,b:2", "-np", "5", "true"}, "-np 5 is more than the 4 slots of the hosts (-H)"},
      {{"-H", "a:2,b:2", "--hostfile", "/x", "true"},
       "-H and --hostfile are alternatives: give one"},
      {{"-H", "a:1", "--min-np", "1", "--host-discovery-script", "echo a", "true"},
       "-H/--hostfile and --host-discovery-script are alternatives: give one"},
      {{"-H", "a:x", "true"},
       "-H 'a:x': 'a:x': slots must be a number from 1 to 1048576 (expected "
       "HOST:SLOTS,HOST:SLOTS,...)"},
      {{"--hostfile", "/nonexistent/hosts", "true"},
       "--hostfile /nonexistent/hosts: cannot be read"},
      {{"-np", "2", "-p", "2222", "true"},
       "-p, -i, --ssh-option, --start-timeout and --network-interface are for jobs across hosts: "
       "give -H or --hostfile"},
      {{"-np", "2", "-x", "A-B=1", "true"}, "-x 'A-B=1': 'A-B' is not a variable name"},
      {{"-np", "2", "-x", "TUTTIRUN_TEST_SURELY_UNSET", "true"},
       "-x TUTTIRUN_TEST_SURELY_UNSET: TUTTIRUN_TEST_SURELY_UNSET is not set in tuttirun's "
       "environment"},
      {{"-H", "localhost:1,remote-host:1", "--bind-to", "core", "true"},
       "--bind-to core: tuttirun binds the ranks it starts on this machine only, and host "
       "'remote-host' is another; give --bind-to auto or none"},
      {{"-H", "remote-host:1", "--coordinator", "tcp://127.0.0.1:5555", "true"},
       "--coordinator tcp://127.0.0.1:5555 is a loopback address, which host 'remote-host' "
       "cannot reach"},
      {{"-np", "2", "true"}, ""},  // the control case: valid, and runs
  };
  for (const auto& [args, problem] : cases) {
    std::vector<std::string> full = {"--coordinator", kNoCoordinator};
    if (std::find(args.begin(), args.end(), "--coordinator") != args.end()) full.clear();
    full.insert(full.end(), args.begin(), args.end());
    Tuttirun run(full);
    if (problem.empty()) {
      EXPECT_EQ(run.Wait(), 0) << run.err();
      continue;
    }
    EXPECT_EQ(run.Wait(), 2) << ::testing::PrintToString(args);
    EXPECT_EQ(run.err(), Usage(problem)) << ::testing::PrintToString(args);
  }
}

TEST(TuttirunHosts, SaysWhenItCannotTellTheAddressRemoteRanksReachItAt) {
  // Both before any ssh runs: exit status 1, as for an unreachable host.
  Tuttirun interface({"-H", "remote-host:1", "--network-interface", "tutti-nope0", "true"});
  EXPECT_EQ(interface.Wait(), 1);
  EXPECT_EQ(interface.err(), "tuttirun: --network-interface tutti-nope0: no such interface here\n");
  Tuttirun unresolvable({"-H", "tuttirun-test-host.invalid:1", "true"});
  EXPECT_EQ(unresolvable.Wait(), 1);
  EXPECT_EQ(unresolvable.err(),
            "tuttirun: cannot tell which address of this machine host "
            "'tuttirun-test-host.invalid' reaches it at (the name does not resolve here to "
            "another machine); give --network-interface\n");
}

TEST(TuttirunHosts, HostsNamingThisMachineRunHereWithHorovodrunsNumbering) {
  // Two "hosts" that are both this machine: each rank is told its host, and ranks are numbered
  // per host as horovodrun numbers them. -np defaults to every slot.
  Tuttirun run({"--coordinator", kNoCoordinator, "-H", "localhost:2,127.0.0.2:1", "sh", "-c",
                "echo $TUTTI_RANK $TUTTI_SIZE $TUTTI_HOST_ID $HOROVOD_HOSTNAME $HOROVOD_LOCAL_RANK "
                "$HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  const auto lines = Lines(run.out());
  EXPECT_TRUE(Contains(lines, "[0] 0 3 localhost localhost 0 2 0 2")) << run.out();
  EXPECT_TRUE(Contains(lines, "[1] 1 3 localhost localhost 1 2 0 1")) << run.out();
  EXPECT_TRUE(Contains(lines, "[2] 2 3 127.0.0.2 127.0.0.2 0 1 1 2")) << run.out();
}

TEST(TuttirunHosts, AHostfileInHorovodrunsFormSizesTheJob) {
  char path[] = "/tmp/tuttirun_hosts.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "# this machine, twice\nlocalhost slots=2\n127.0.0.3 slots=1\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  // -hostfile: horovodrun's single-dash spelling.
  Tuttirun run({"--coordinator", kNoCoordinator, "-hostfile", path, "sh", "-c",
                "echo $TUTTI_SIZE $TUTTI_HOST_ID"});
  EXPECT_EQ(run.Wait(), 0) << run.err();
  ::unlink(path);
  const auto lines = Lines(run.out());
  EXPECT_EQ(lines.size(), 3u) << run.out();
  EXPECT_TRUE(Contains(lines, "[2] 3 127.0.0.3")) << run.out();
}

TEST(TuttirunHosts, DashXSetsAVariableForEveryRank) {
  Tuttirun run({"-np", "2", "--coordinator", kNoCoordinator, "-x", "TUTTIRUN_X=a b", "-x",
                "TUTTI_RANK=ignored", "sh", "-c", "echo \"$TUTTIRUN_X\" $TUTTI_RANK"});
  ASSERT_EQ(run.Wait(), 0) << run.err();
  const auto lines = Lines(run.out());
  EXPECT_TRUE(Contains(lines, "[0] a b 0")) << run.out();  // tuttirun's own variables win
  EXPECT_TRUE(Contains(lines, "[1] a b 1")) << run.out();
}

}  // namespace
