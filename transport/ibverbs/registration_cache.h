// A bounded LRU of memory registrations by address range, with no verbs in it: what registering
// means is a Registrar's (ibv_reg_mr in transport/ibverbs/ibverbs_device.cc, a fake in the unit
// tests). Registering costs a system call and page-table work on every call, so an ibverbs
// channel that sends straight from the caller's memory (the lane's fusion buffer, a user's
// tensor) keeps the registrations it made and finds them again the next step.
//
// Why only for on-demand-paging registrations: a classic registration pins the pages it found.
// If the application frees that memory and a later allocation gets the same addresses, a cached
// registration would still point at the old pages and send stale bytes, with nothing to notice.
// An on-demand-paging registration follows the process's page tables instead, so a cached range
// stays right however the memory behind it changes. IbvDevice uses this cache only where the
// device has on-demand paging; elsewhere channels copy through their own registered buffers.
//
// Bounds: at most `max_entries` registrations and `max_bytes` registered. A miss evicts the least
// recently used registrations that no write in flight uses (pinned ones stay) until the new one
// fits; when it cannot fit, Acquire gives an empty lease and the caller copies instead.
//
// Not thread-safe: IbvDevice guards its one cache with a mutex for the channels sharing it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

#include "common/status.h"

namespace tutti::transport::ibverbs {

// What a registration gives the device: the keys a work request names its memory by.
struct MemoryKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class Registrar {
 public:
  virtual ~Registrar() = default;
  // Registers [begin, begin + len); `*handle` is what Deregister takes back.
  virtual Status Register(uintptr_t begin, size_t len, MemoryKeys* keys, void** handle) = 0;
  virtual void Deregister(void* handle) = 0;
};

class RegistrationCache {
 public:
  // A registration in use: valid until Release. Empty (`id` 0) when there was no room.
  struct Lease {
    uint64_t id = 0;
    MemoryKeys keys;
    explicit operator bool() const { return id != 0; }
  };

  // `page`: registrations cover whole pages, so that neighbouring buffers share one.
  RegistrationCache(Registrar* registrar, size_t max_entries, size_t max_bytes,
                    size_t page = 4096);
  // Deregisters everything; every lease must have been released.
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [addr, addr + len), pinned until Release (several leases may pin
  // one). A hit makes it the most recently used; a miss registers the page-aligned range.
  // Errors are the Registrar's.
  Status Acquire(const void* addr, size_t len, Lease* lease);
  void Release(const Lease& lease);

  size_t entries() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint64_t id;
    uintptr_t begin, end;
    MemoryKeys keys;
    void* handle;
    int pins;
  };
  // Deregisters unpinned entries, least recently used first, until `need` more bytes and one
  // more entry fit. False if they cannot.
  bool MakeRoom(size_t need);

  Registrar* registrar_;
  const size_t max_entries_, max_bytes_, page_;
  std::list<Entry> entries_;  // most recently used first; a few dozen, so scanning is cheap
  size_t bytes_ = 0;
  uint64_t next_id_ = 1;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace tutti::transport::ibverbs
