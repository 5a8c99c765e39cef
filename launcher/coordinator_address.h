// Where tuttirun's embedded coordinator listens in a job across hosts (docs/launcher.md, "Across
// hosts"): every interface, advertised to the ranks at one address of this machine that the
// remote hosts can reach. Main thread only; called once before the coordinator starts.
#pragma once

#include <string>

namespace tutti::launcher {

// The IPv4 address to advertise: that of `network_interface` when given, else the source
// address of this machine's route toward `remote_host` (resolved here). Empty with
// `*error` set when the interface has no IPv4 address or the host does not resolve to a route
// off this machine.
std::string AdvertisedAddress(const std::string& network_interface, const std::string& remote_host,
                              std::string* error);

// "tcp://0.0.0.0:PORT" (the endpoint a coordinator bound to every interface reports) as
// "tcp://ADDRESS:PORT".
std::string AdvertisedEndpoint(const std::string& bound_endpoint, const std::string& address);

}  // namespace tutti::launcher
