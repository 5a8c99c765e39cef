// Which backend carries each pair of ranks (docs/transports.md), decided in one place from the
// backend table: with TUTTI_TRANSPORT=auto, the reaching backend of highest preference (shared
// memory on one host, TCP across hosts); with a backend's name, that backend for every pair, and
// an error naming the pair it cannot reach. Every rank plans from the same Welcome and the same
// setting, so both ends of a pair agree; the lower rank connects with its plan.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/backend.h"
#include "transport/transport.h"

namespace tutti::transport {

// ok for "auto" and every backend's name; else kInvalidArgument naming the choices.
Status CheckTransportName(const std::string& name);

// Fills `routes` by global rank from `peers` (the whole job, this rank `self` among them, on host
// `self_host`), as `transport` ("auto" or a backend's name) says.
Status PlanRoutes(int32_t self, const std::string& self_host, const std::vector<PeerAddress>& peers,
                  const std::string& transport, std::vector<PeerRoute>* routes);

}  // namespace tutti::transport
