// A real single-member etcd for the HA tests: started on free loopback ports with a data
// directory of its own, ready (it answers a read) when the constructor returns, killed, reaped
// and its directory removed by the destructor. Skips the test where etcd is not installed, and
// fails it under CI=true, where it must be (scripts/setup.sh installs etcd-server).
#pragma once

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "server/ha/etcd_client.h"
#include "multiproc/process.h"

namespace tutti::testing {

// A loopback port free at the time of the call (the OS's choice); etcd needs a number.
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(address.sin_port);
}

inline bool EtcdInstalled() { return access("/usr/bin/etcd", X_OK) == 0; }

// In a test: skips it without etcd, fails it under CI=true.
#define TUTTI_REQUIRE_ETCD()                                                              \
  do {                                                                                    \
    if (!::tutti::testing::EtcdInstalled()) {                                             \
      const char* ci = getenv("CI");                                                      \
      if (ci != nullptr && std::string(ci) == "true")                                     \
        FAIL() << "etcd is not installed (apt-get install etcd-server): CI must run this"; \
      GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";              \
    }                                                                                     \
  } while (0)

class EtcdProcess {
 public:
  EtcdProcess() {
    char dir[] = "/tmp/tutti-etcd-XXXXXX";
    dir_ = mkdtemp(dir);
    // A port taken between FreePort() and etcd's bind makes etcd exit: try again.
    for (int attempt = 0; attempt < 3 && !ready_; ++attempt) Start();
  }
  ~EtcdProcess() {
    process_.reset();  // SIGKILL and reap
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  bool ready() const { return ready_; }
  const std::string& endpoint() const { return endpoint_; }
  std::string transcript() const { return process_ ? process_->transcript() : ""; }

 private:
  void Start() {
    const int client = FreePort(), peer = FreePort();
    endpoint_ = "http://127.0.0.1:" + std::to_string(client);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    process_ = std::make_unique<Process>(
        std::vector<std::string>{"/usr/bin/etcd", "--name", "tutti-test", "--data-dir",
                                 dir_ + "/data" + std::to_string(client),
                                 "--listen-client-urls", endpoint_, "--advertise-client-urls",
                                 endpoint_, "--listen-peer-urls", peer_url,
                                 "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                                 "tutti-test=" + peer_url, "--log-level", "error"},
        std::map<std::string, std::string>{});
    server::ha::EtcdClient probe(endpoint_, std::chrono::milliseconds(500));
    const auto deadline = In(60);
    while (Clock::now() < deadline) {
      std::optional<server::ha::KeyValue> unused;
      if (probe.Get("probe", &unused).ok()) {
        ready_ = true;
        return;
      }
      if (process_->Wait(Clock::now()).has_value()) return;  // exited: its port was taken
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // etcd has no ready signal
    }
  }

  std::string dir_;
  std::string endpoint_;
  std::unique_ptr<Process> process_;
  bool ready_ = false;
};

}  // namespace tutti::testing
