// Which backend carries each pair of ranks (docs/transports.md), decided in one place from the
// backend table: with TUTTI_TRANSPORT=auto, the reaching backend of highest preference (shared
// memory on one host; across hosts ibverbs where this rank has a device, else TCP); with a
// backend's name, that backend for every pair, and an error naming the pair it cannot reach.
// Every rank plans from the same Welcome and the same setting; the lower rank of a pair connects
// with its plan and the higher adopts what arrives. The one thing a plan cannot know is whether
// the peer has an RDMA device (the Welcome does not say): an ibverbs route whose peer has none is
// refused in its handshake and carried over TCP on the same connection
// (transport/ibverbs/ibverbs_setup.h).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/backend.h"
#include "transport/transport.h"

namespace tutti::transport {

// ok for "auto" and every backend's name; else kInvalidArgument naming the choices.
Status CheckTransportName(const std::string& name);

// CheckTransportName, and for a backend's name that this process can use it: kInvalidArgument
// "TUTTI_TRANSPORT=<name>, but <why>" where it cannot (ibverbs: "no RDMA device"). What
// PlanRoutes checks first, for callers that refuse a setting before meeting the coordinator.
Status CheckForcedTransport(const std::string& transport);

// Fills `routes` by global rank from `peers` (the whole job, this rank `self` among them, on host
// `self_host`), as `transport` ("auto" or a backend's name) says.
Status PlanRoutes(int32_t self, const std::string& self_host, const std::vector<PeerAddress>& peers,
                  const std::string& transport, std::vector<PeerRoute>* routes);

}  // namespace tutti::transport
