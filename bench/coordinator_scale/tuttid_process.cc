#include "coordinator_scale/tuttid_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace tutti::bench {
namespace {

// utime + stime of /proc/.../stat, in seconds; the command name into `comm`.
double StatCpu(const std::string& path, std::string* comm) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return 0;
  if (comm) *comm = text.substr(open + 1, close - open - 1);
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // After the name: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A thread's time on a CPU, from the first field of its schedstat; -1 if unreadable.
double SchedCpu(const std::string& path) {
  std::ifstream in(path);
  unsigned long long ns = 0;
  return in >> ns ? static_cast<double>(ns) * 1e-9 : -1;
}

long StatusKiB(const std::string& text, const char* key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::atol(text.c_str() + at + std::strlen(key));
}

int CountEntries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

}  // namespace

ProcessSample SampleProcess(pid_t pid) {
  ProcessSample s;
  s.at = Clock::now();
  const std::string base = "/proc/" + std::to_string(pid);
  s.stat_cpu_s = StatCpu(base + "/stat", nullptr);
  if (DIR* tasks = opendir((base + "/task").c_str())) {
    while (dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      const std::string task = base + "/task/" + e->d_name;
      std::string comm;
      double cpu = StatCpu(task + "/stat", &comm);
      const double precise = SchedCpu(task + "/schedstat");
      if (precise >= 0) cpu = precise;
      s.cpu_s += cpu;
      if (std::to_string(pid) == e->d_name) s.loop_cpu_s = cpu;
      else if (comm.rfind("ZMQbg", 0) == 0) s.zmq_cpu_s += cpu;
    }
    closedir(tasks);
  }
  std::ifstream status(base + "/status");
  std::string text((std::istreambuf_iterator<char>(status)), std::istreambuf_iterator<char>());
  s.rss_bytes = StatusKiB(text, "VmRSS:") * 1024;
  s.peak_rss_bytes = StatusKiB(text, "VmHWM:") * 1024;
  s.open_fds = CountEntries(base + "/fd");
  return s;
}

Usage Between(const ProcessSample& before, const ProcessSample& after) {
  return {std::chrono::duration<double>(after.at - before.at).count(), after.cpu_s - before.cpu_s,
          after.loop_cpu_s - before.loop_cpu_s, after.zmq_cpu_s - before.zmq_cpu_s};
}

void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

long FileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur == RLIM_INFINITY ? 1L << 30 : static_cast<long>(limit.rlim_cur);
}

TuttidProcess::TuttidProcess(const std::string& program, const std::vector<std::string>& extra_args,
                             const std::string& log_path) {
  std::vector<std::string> args = {program, "--bind", "tcp://127.0.0.1:*"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    dup2(out[1], STDOUT_FILENO);
    if (log >= 0) dup2(log, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  if (log >= 0) close(log);
  // tuttid prints "tuttid listening on ENDPOINT" once its socket is bound.
  std::string line;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (line.find('\n') == std::string::npos && Clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char chunk[256];
    const ssize_t n = read(out[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    line.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  const std::string prefix = "tuttid listening on ";
  const size_t at = line.find(prefix);
  if (at == std::string::npos) {
    Stop();
    throw std::runtime_error("tuttid did not start (see " + log_path + ")");
  }
  endpoint_ = line.substr(at + prefix.size(), line.find('\n', at) - at - prefix.size());
}

TuttidProcess::~TuttidProcess() { Stop(); }

ProcessSample AwaitSettled(pid_t pid, int fds, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ProcessSample last = SampleProcess(pid);
  int stable = 0;
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // sampling /proc, not syncing
    ProcessSample now = SampleProcess(pid);
    stable = now.open_fds >= fds && now.rss_bytes == last.rss_bytes ? stable + 1 : 0;
    last = now;
    if (stable >= 4) break;
  }
  return last;
}

int TuttidProcess::Stop() {
  if (stopped_ || pid_ <= 0) return 0;
  stopped_ = true;
  kill(pid_, SIGTERM);
  int raw = 0;
  for (int i = 0; i < 200; ++i) {  // 10 s for the goodbyes to every rank
    if (waitpid(pid_, &raw, WNOHANG) == pid_) return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &raw, 0);
  return -1;
}

}  // namespace tutti::bench
