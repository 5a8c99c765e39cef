#include "transport/ibverbs/ibverbs_device.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "transport/ibverbs/qp_params.h"

namespace tutti::transport::ibverbs {
namespace {

static_assert(kLinkLayerInfiniband == IBV_LINK_LAYER_INFINIBAND);
static_assert(kLinkLayerEthernet == IBV_LINK_LAYER_ETHERNET);

// Registrations through the cache: a few dozen buffers per process (fusion buffers, large
// tensors). On-demand paging pins nothing, so the byte bound only keeps the device's page tables
// in reason.
constexpr size_t kCacheEntries = 64;
constexpr size_t kCacheBytes = size_t{64} << 30;

bool Zero(const ibv_gid& gid) {
  for (uint8_t byte : gid.raw)
    if (byte != 0) return false;
  return true;
}

// ::ffff:a.b.c.d, the form RoCE v2 gives an IPv4 address.
bool Ipv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

// The GID this port should be reached by: entry 0 on InfiniBand; on Ethernet the best populated
// entry (RoCE v2 over IPv4, then any RoCE v2, then any). False if it has none.
bool PickGid(ibv_context* context, uint8_t port, const ibv_port_attr& attr, uint32_t* index,
             ibv_gid* gid) {
  if (attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    if (ibv_query_gid(context, port, 0, gid) != 0 || Zero(*gid)) return false;
    *index = 0;
    return true;
  }
  int best = -1;
  for (int i = 0; i < attr.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    // Unpopulated entries fail (ENODATA); they are skipped.
    if (ibv_query_gid_ex(context, port, static_cast<uint32_t>(i), &entry, 0) != 0 ||
        Zero(entry.gid))
      continue;
    const int rank = entry.gid_type == IBV_GID_TYPE_ROCE_V2 ? (Ipv4Mapped(entry.gid) ? 3 : 2) : 1;
    if (rank > best) {
      best = rank;
      *index = static_cast<uint32_t>(i);
      *gid = entry.gid;
    }
  }
  return best > 0;
}

// Whether RC writes may read their source through on-demand paging.
bool OdpSend(ibv_context* context) {
  ibv_device_attr_ex attr{};
  if (ibv_query_device_ex(context, nullptr, &attr) != 0) return false;
  return (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
         (attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_SEND);
}

// The walk behind Discover.
bool Walk(PortChoice* choice, std::string* why) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    *why = "no RDMA device";
    return false;
  }
  std::string obstacles;
  auto note = [&](const std::string& what) { obstacles += (obstacles.empty() ? "" : "; ") + what; };
  bool found = false;
  for (int i = 0; i < count && !found; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    ibv_context* context = ibv_open_device(list[i]);
    if (context == nullptr) {
      note(name + ": cannot open (" + std::strerror(errno) + ")");
      continue;
    }
    ibv_device_attr device{};
    if (ibv_query_device(context, &device) != 0) note(name + ": cannot query");
    for (uint8_t port = 1; port <= device.phys_port_cnt && !found; ++port) {
      const std::string where = name + " port " + std::to_string(port);
      ibv_port_attr attr{};
      if (ibv_query_port(context, port, &attr) != 0) {
        note(where + ": cannot query");
      } else if (attr.state != IBV_PORT_ACTIVE) {
        note(where + ": " + ibv_port_state_str(attr.state));
      } else if (!PickGid(context, port, attr, &choice->gid_index, &choice->gid)) {
        note(where + ": no GID");
      } else {
        choice->device = name;
        choice->port = port;
        choice->lid = attr.lid;
        choice->active_mtu = attr.active_mtu;
        choice->link_layer = attr.link_layer;
        choice->odp_send = OdpSend(context);
        found = true;
      }
    }
    ibv_close_device(context);
  }
  ibv_free_device_list(list);
  if (!found) *why = "no RDMA device with an active port and a GID (" + obstacles + ")";
  return found;
}

}  // namespace

bool Discover(PortChoice* choice, std::string* why) {
  static std::once_flag once;
  static bool viable = false;
  static PortChoice found;
  static std::string reason;
  std::call_once(once, [] { viable = Walk(&found, &reason); });
  if (viable)
    *choice = found;
  else
    *why = reason;
  return viable;
}

Status IbvDevice::Acquire(std::shared_ptr<IbvDevice>* device) {
  static std::mutex mu;
  static std::weak_ptr<IbvDevice> shared;
  std::lock_guard<std::mutex> lock(mu);
  if ((*device = shared.lock())) return Status::Ok();
  PortChoice port;
  std::string why;
  if (!Discover(&port, &why)) return Status(Code::kDeviceUnavailable, "ibverbs: " + why);
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  ibv_context* context = nullptr;
  for (int i = 0; list != nullptr && i < count && context == nullptr; ++i)
    if (port.device == ibv_get_device_name(list[i])) context = ibv_open_device(list[i]);
  const int error = errno;
  if (list != nullptr) ibv_free_device_list(list);
  if (context == nullptr)
    return Status(Code::kDeviceUnavailable,
                  "ibverbs: cannot open " + port.device + ": " + std::strerror(error));
  ibv_pd* pd = ibv_alloc_pd(context);
  if (pd == nullptr) {
    const std::string reason = std::strerror(errno);
    ibv_close_device(context);
    return Status(Code::kDeviceUnavailable, "ibverbs: ibv_alloc_pd on " + port.device + ": " + reason);
  }
  device->reset(new IbvDevice(context, pd, std::move(port)));
  shared = *device;
  return Status::Ok();
}

IbvDevice::IbvDevice(ibv_context* context, ibv_pd* pd, PortChoice port)
    : handles_{context, pd},
      context_(context),
      pd_(pd),
      port_(std::move(port)),
      registrar_(pd),
      cache_(&registrar_, kCacheEntries, kCacheBytes) {}

IbvDevice::Handles::~Handles() {
  ibv_dealloc_pd(pd);
  ibv_close_device(context);
}

Status IbvDevice::AcquireMemory(const void* addr, size_t len, RegistrationCache::Lease* lease) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cache_.Acquire(addr, len, lease);
}

void IbvDevice::ReleaseMemory(const RegistrationCache::Lease& lease) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  cache_.Release(lease);
}

Status IbvDevice::OdpRegistrar::Register(uintptr_t begin, size_t len, MemoryKeys* keys,
                                         void** handle) {
  ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(begin), len,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  if (mr == nullptr)
    return Status(Code::kInternal, std::string("ibverbs: ibv_reg_mr: ") + std::strerror(errno));
  *keys = MemoryKeys{mr->lkey, mr->rkey};
  *handle = mr;
  return Status::Ok();
}

void IbvDevice::OdpRegistrar::Deregister(void* handle) { ibv_dereg_mr(static_cast<ibv_mr*>(handle)); }

}  // namespace tutti::transport::ibverbs
