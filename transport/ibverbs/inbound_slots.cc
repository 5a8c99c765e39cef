#include "transport/ibverbs/inbound_slots.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tutti::transport::ibverbs {

Status InboundSlots::Arrived(uint32_t bytes) {
  if (filled_ == slots_ || filled_ == sizeof(lengths_) / sizeof(lengths_[0]))
    return Status(Code::kPeerLost, "ibverbs: the peer wrote into a full ring (" +
                                       std::to_string(slots_) + " slots): it ignored its credits");
  if (bytes == 0 || bytes > slot_bytes_)
    return Status(Code::kPeerLost, "ibverbs: the peer wrote " + std::to_string(bytes) +
                                       " bytes into a slot of " + std::to_string(slot_bytes_));
  lengths_[(head_ + filled_) % slots_] = bytes;
  ++filled_;
  readable_ += bytes;
  return Status::Ok();
}

size_t InboundSlots::Read(char* out, size_t len, uint32_t* freed) {
  *freed = 0;
  size_t done = 0;
  while (done < len && filled_ > 0) {
    const uint32_t length = lengths_[head_];
    const size_t n = std::min<size_t>(len - done, length - offset_);
    std::memcpy(out + done, base_ + static_cast<size_t>(head_) * slot_bytes_ + offset_, n);
    done += n;
    offset_ += static_cast<uint32_t>(n);
    if (offset_ == length) {  // the slot is empty: the peer may write it again
      head_ = (head_ + 1) % slots_;
      --filled_;
      offset_ = 0;
      ++*freed;
    }
  }
  readable_ -= done;
  return done;
}

}  // namespace tutti::transport::ibverbs
