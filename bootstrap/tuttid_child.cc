#include "bootstrap/tuttid_child.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tutti::bootstrap {
namespace {

bool Executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

TuttidChild& TuttidChild::operator=(TuttidChild&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = other.pid_;
    endpoint_ = std::move(other.endpoint_);
    other.pid_ = -1;
  }
  return *this;
}

Status TuttidChild::Start(const std::string& binary, const std::string& bind, int64_t timeout_ms,
                          TuttidChild* child) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return Status(Code::kInternal, std::string("cannot start tuttid: pipe: ") + std::strerror(errno));
  // Built before fork: the child of a threaded process may only make async-signal-safe calls.
  // --exit-with-parent: tuttid ends with the thread that started it, even if that rank is killed.
  // --exit-when-idle: it also ends once the job has, so that its rank need not stop it first.
  std::vector<std::string> args = {binary, "--bind", bind, "--log-level", "warn",
                                   "--exit-with-parent", "--exit-when-idle"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  child->Stop();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return Status(Code::kInternal, std::string("cannot start tuttid: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    signal(SIGPIPE, SIG_IGN);  // its stdout is read only up to the endpoint line
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  child->pid_ = pid;
  // "tuttid listening on tcp://...\n"
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string prefix = "tuttid listening on ";
  Status status = Status::Ok();
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    pollfd fd{out[0], POLLIN, 0};
    const int ready = left > 0 ? poll(&fd, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      status = Status(Code::kTimeout, "tuttid (" + binary + ") did not say where it listens within " +
                                          std::to_string(timeout_ms) + " ms");
      break;
    }
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int wstatus = 0;
      waitpid(pid, &wstatus, 0);
      child->pid_ = -1;
      const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      status = Status(Code::kInternal,
                      "tuttid (" + binary + ") exited with status " + std::to_string(code) +
                          (code == 127 ? " (it cannot be executed)" : "") +
                          " before listening; its stderr is this rank's");
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (!status.ok()) {
    child->Stop();
    return status;
  }
  const std::string line = text.substr(0, text.find('\n'));
  if (line.rfind(prefix, 0) != 0) {
    child->Stop();
    return Status(Code::kInternal, "tuttid (" + binary + ") said '" + line +
                                       "' where it should say where it listens");
  }
  child->endpoint_ = line.substr(prefix.size());
  return Status::Ok();
}

bool TuttidChild::WaitForExit(int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pid_ > 0) {
    const pid_t r = waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    usleep(10 * 1000);
  }
  return true;
}

void TuttidChild::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {  // 5 s
    int wstatus;
    const pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      return;
    }
    usleep(10 * 1000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string FindTuttid(const void* anchor) {
  if (const char* named = std::getenv("TUTTI_TUTTID"); named != nullptr && *named != '\0')
    return named;
  Dl_info info{};
  if (anchor != nullptr && dladdr(anchor, &info) != 0 && info.dli_fname != nullptr) {
    const std::string dir = Dirname(info.dli_fname);
    for (const std::string& candidate : {dir + "/tuttid", dir + "/../bin/tuttid"})
      if (Executable(candidate)) return candidate;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string candidate = dirs.substr(start, end - start) + "/tuttid";
      if (end > start && Executable(candidate)) return candidate;
      start = end + 1;
    }
  }
  return "";
}

Status StartJobCoordinator(const void* anchor, bool one_host, int64_t timeout_ms,
                           TuttidChild* child, std::string* endpoint) {
  const std::string binary = FindTuttid(anchor);
  if (binary.empty())
    return Status(Code::kInvalidArgument,
                  "no coordinator named (TUTTI_COORDINATOR) and no tuttid to start: set "
                  "TUTTI_TUTTID, or put tuttid beside libtutti.so or on PATH");
  std::string advertised;
  if (!one_host) {
    advertised = AdvertisedHost();
    if (advertised.empty())
      return Status(Code::kInvalidArgument,
                    "the job spans hosts and this one has no non-loopback IPv4 address for its "
                    "coordinator: set TUTTI_COORDINATOR_HOST (or TUTTI_COORDINATOR)");
  }
  TUTTI_RETURN_IF_ERROR(TuttidChild::Start(
      binary, one_host ? "tcp://127.0.0.1:*" : "tcp://0.0.0.0:*", timeout_ms, child));
  *endpoint = child->endpoint();
  if (!one_host) {
    // tcp://0.0.0.0:PORT: the others reach it at this host's address.
    const size_t colon = endpoint->rfind(':');
    *endpoint = "tcp://" + advertised + endpoint->substr(colon);
  }
  return Status::Ok();
}

Status RandomToken(std::string* token) {
  unsigned char raw[16];
  size_t got = 0;
  while (got < sizeof(raw)) {
    const ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(Code::kInternal, std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char kDigits[] = "0123456789abcdef";
  token->clear();
  for (unsigned char b : raw) {
    *token += kDigits[b >> 4];
    *token += kDigits[b & 15];
  }
  return Status::Ok();
}

std::string AdvertisedHost() {
  if (const char* host = std::getenv("TUTTI_COORDINATOR_HOST"); host != nullptr && *host != '\0')
    return host;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text))) found = text;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace tutti::bootstrap
