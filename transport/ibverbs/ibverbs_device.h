// The process's RDMA device (docs/transports.md, "ibverbs"): discovery, which is the backend's
// viability test, and the one open device that every ibverbs channel of the process shares.
//
// Discovery asks rdma-core for its devices (ibv_get_device_list) and takes the first one with an
// active port that has a GID: on InfiniBand entry 0 (subnet prefix and port GUID); on Ethernet
// (RoCE) a populated entry, RoCE v2 over IPv4 first since that is what routes between subnets.
// Where it finds none it says why, and that sentence is what `TUTTI_TRANSPORT=ibverbs` is refused
// with: "no RDMA device" when rdma-core lists none (no device, or no kernel module: the list
// comes back empty or fails with ENOSYS), else each port's obstacle ("mlx5_0 port 1: DOWN").
// The verdict is computed once per process and kept, so route planning may ask for every pair.
//
// Threads: Discover and IbvDevice::Acquire from any thread. An IbvDevice's context and
// protection domain are used by channels on their own threads (verbs calls on one context are
// thread-safe); its registration cache is behind a mutex.
// Lifetime: channels share the IbvDevice (shared_ptr); it closes when the last one goes, after
// every registration made through it was released.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "transport/ibverbs/registration_cache.h"

namespace tutti::transport::ibverbs {

// The port discovery chose.
struct PortChoice {
  std::string device;  // e.g. "mlx5_0"
  uint8_t port = 0;
  uint32_t gid_index = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  // On-demand paging for the sources of RC writes: sends may use the registration cache.
  bool odp_send = false;
};

// Whether this process has a usable port, and which; `*why` when not.
bool Discover(PortChoice* choice, std::string* why);

class IbvDevice {
 public:
  // The process's open device, opened now if no channel holds it.
  static Status Acquire(std::shared_ptr<IbvDevice>* device);
  ~IbvDevice() = default;
  IbvDevice(const IbvDevice&) = delete;
  IbvDevice& operator=(const IbvDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const PortChoice& port() const { return port_; }

  // Whether sends may go straight from the caller's memory (on-demand paging; see
  // registration_cache.h for why only then).
  bool zero_copy() const { return port_.odp_send; }
  // A cached registration covering [addr, addr + len), pinned until released; an empty lease
  // when the cache has no room (copy instead). Only where zero_copy().
  Status AcquireMemory(const void* addr, size_t len, RegistrationCache::Lease* lease);
  void ReleaseMemory(const RegistrationCache::Lease& lease);

 private:
  // ibv_reg_mr with on-demand paging: nothing is pinned, the device follows the page tables.
  class OdpRegistrar : public Registrar {
   public:
    explicit OdpRegistrar(ibv_pd* pd) : pd_(pd) {}
    Status Register(uintptr_t begin, size_t len, MemoryKeys* keys, void** handle) override;
    void Deregister(void* handle) override;

   private:
    ibv_pd* pd_;
  };

  // The open context and its protection domain, closed by the last member to go: after the
  // cache, so that every registration is gone before the domain holding it.
  struct Handles {
    ibv_context* context;
    ibv_pd* pd;
    ~Handles();
  };

  IbvDevice(ibv_context* context, ibv_pd* pd, PortChoice port);

  Handles handles_;
  ibv_context* const context_;
  ibv_pd* const pd_;
  const PortChoice port_;
  OdpRegistrar registrar_;
  std::mutex cache_mu_;
  RegistrationCache cache_;  // guarded by cache_mu_
};

}  // namespace tutti::transport::ibverbs
