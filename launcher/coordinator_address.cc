#include "launcher/coordinator_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include "common/local_address.h"

namespace tutti::launcher {
namespace {

std::string InterfaceAddress(const std::string& name, std::string* error) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) {
    *error = "--network-interface " + name + ": cannot list this machine's interfaces";
    return "";
  }
  std::string address;
  bool exists = false;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr || name != i->ifa_name) continue;
    exists = true;
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) {
      address = text;
      break;
    }
  }
  ::freeifaddrs(all);
  if (address.empty())
    *error = "--network-interface " + name +
             (exists ? ": the interface has no IPv4 address" : ": no such interface here");
  return address;
}

}  // namespace

std::string AdvertisedAddress(const std::string& network_interface, const std::string& remote_host,
                              std::string* error) {
  if (!network_interface.empty()) return InterfaceAddress(network_interface, error);
  // "user@host" is ssh's business; the route is toward the host. The port does not matter for
  // a route; any valid one will do.
  const std::string host = remote_host.substr(remote_host.find('@') + 1);
  const std::string address = tutti::LocalAddressToward("tcp://" + host + ":22");
  if (address.rfind("127.", 0) == 0) {
    *error = "cannot tell which address of this machine host '" + remote_host +
             "' reaches it at (the name does not resolve here to another machine); give "
             "--network-interface";
    return "";
  }
  return address;
}

std::string AdvertisedEndpoint(const std::string& bound_endpoint, const std::string& address) {
  return "tcp://" + address + bound_endpoint.substr(bound_endpoint.rfind(':'));
}

}  // namespace tutti::launcher
