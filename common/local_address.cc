#include "common/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tutti {

std::string LocalAddressToward(const std::string& zmq_endpoint) {
  const std::string fallback = "127.0.0.1";
  const std::string prefix = "tcp://";
  if (zmq_endpoint.compare(0, prefix.size(), prefix) != 0) return fallback;
  const std::string rest = zmq_endpoint.substr(prefix.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return fallback;
  const std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) return fallback;
  std::string address = fallback;
  // Connecting a UDP socket sends nothing; it only makes the kernel pick the route and source.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr)
      address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

}  // namespace tutti
