#include "transport/route_planner.h"

namespace tutti::transport {
namespace {

constexpr const char* kAuto = "auto";

// The viable backend `transport` forces, or null for auto.
Status Forced(const std::string& transport, const Backend** forced) {
  *forced = nullptr;
  TUTTI_RETURN_IF_ERROR(CheckForcedTransport(transport));
  if (transport != kAuto) *forced = FindBackend(transport);
  return Status::Ok();
}

}  // namespace

Status CheckForcedTransport(const std::string& transport) {
  if (transport == kAuto) return Status::Ok();
  TUTTI_RETURN_IF_ERROR(CheckTransportName(transport));
  std::string why;
  if (!FindBackend(transport)->Viable(&why))
    return Status(Code::kInvalidArgument, "TUTTI_TRANSPORT=" + transport + ", but " + why);
  return Status::Ok();
}

Status CheckTransportName(const std::string& name) {
  if (name == kAuto || FindBackend(name)) return Status::Ok();
  std::string choices = kAuto;
  const auto& backends = Backends();
  for (size_t i = 0; i < backends.size(); ++i)
    choices += std::string(i + 1 == backends.size() ? " or " : ", ") + backends[i]->name();
  return Status(Code::kInvalidArgument,
                "unknown transport '" + name + "' (TUTTI_TRANSPORT): use " + choices);
}

Status PlanRoutes(int32_t self, const std::string& self_host, const std::vector<PeerAddress>& peers,
                  const std::string& transport, std::vector<PeerRoute>* routes) {
  const Backend* forced;
  TUTTI_RETURN_IF_ERROR(Forced(transport, &forced));
  const PeerAddress me{self, "", self_host};
  routes->clear();
  for (const PeerAddress& peer : peers) {
    PeerRoute route{peer.endpoint, Link::kNone};
    std::string why;
    if (peer.rank == self) {
      // no route to itself
    } else if (forced) {
      if (!forced->CanReach(me, peer, &why))
        return Status(Code::kInvalidArgument,
                      "TUTTI_TRANSPORT=" + transport + ", but " + why + ": use auto or tcp");
      route.link = forced->link();
    } else {
      const Backend* best = nullptr;
      for (const Backend* backend : Backends())
        if ((!best || backend->preference() > best->preference()) && backend->Viable(&why) &&
            backend->CanReach(me, peer, &why))
          best = backend;
      if (!best)
        return Status(Code::kInvalidArgument,
                      "no data-plane backend reaches rank " + std::to_string(peer.rank));
      route.link = best->link();
    }
    routes->push_back(std::move(route));
  }
  return Status::Ok();
}

}  // namespace tutti::transport
