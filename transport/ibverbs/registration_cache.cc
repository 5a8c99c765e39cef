#include "transport/ibverbs/registration_cache.h"

namespace tutti::transport::ibverbs {

RegistrationCache::RegistrationCache(Registrar* registrar, size_t max_entries, size_t max_bytes,
                                     size_t page)
    : registrar_(registrar), max_entries_(max_entries), max_bytes_(max_bytes), page_(page) {}

RegistrationCache::~RegistrationCache() {
  for (Entry& entry : entries_) registrar_->Deregister(entry.handle);
}

Status RegistrationCache::Acquire(const void* addr, size_t len, Lease* lease) {
  *lease = Lease{};
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = begin + len;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->begin <= begin && end <= it->end) {
      ++hits_;
      ++it->pins;
      entries_.splice(entries_.begin(), entries_, it);  // most recently used
      *lease = Lease{it->id, it->keys};
      return Status::Ok();
    }
  }
  ++misses_;
  const uintptr_t first = begin / page_ * page_;
  const uintptr_t last = (end + page_ - 1) / page_ * page_;
  const size_t bytes = last - first;
  if (len == 0 || !MakeRoom(bytes)) return Status::Ok();  // the caller copies instead
  Entry entry{next_id_, first, last, {}, nullptr, 1};
  TUTTI_RETURN_IF_ERROR(registrar_->Register(first, bytes, &entry.keys, &entry.handle));
  ++next_id_;
  bytes_ += bytes;
  entries_.push_front(entry);
  *lease = Lease{entry.id, entry.keys};
  return Status::Ok();
}

void RegistrationCache::Release(const Lease& lease) {
  for (Entry& entry : entries_)
    if (entry.id == lease.id) {
      if (entry.pins > 0) --entry.pins;
      return;
    }
}

bool RegistrationCache::MakeRoom(size_t need) {
  if (need > max_bytes_ || max_entries_ == 0) return false;
  // Least recently used first: from the back.
  for (auto it = entries_.end(); it != entries_.begin() &&
                                 (entries_.size() >= max_entries_ || bytes_ + need > max_bytes_);) {
    --it;
    if (it->pins > 0) continue;
    registrar_->Deregister(it->handle);
    bytes_ -= it->end - it->begin;
    ++evictions_;
    it = entries_.erase(it);
  }
  return entries_.size() < max_entries_ && bytes_ + need <= max_bytes_;
}

}  // namespace tutti::transport::ibverbs
