#include "transport/ibverbs/credit_window.h"

#include <algorithm>
#include <string>

namespace tutti::transport::ibverbs {

uint32_t EncodeImmediate(uint32_t bytes, uint32_t credits) {
  return (credits << kImmediateBytesBits) | (bytes & kMaxImmediateBytes);
}

Immediate DecodeImmediate(uint32_t immediate) {
  return Immediate{immediate & kMaxImmediateBytes, immediate >> kImmediateBytesBits};
}

CreditWindow::CreditWindow(uint32_t slots, uint32_t batch)
    : slots_(std::min(slots, kMaxImmediateCredits)),
      batch_(std::clamp<uint32_t>(batch, 1, std::max<uint32_t>(slots_, 1))),
      credits_(slots_) {}

bool CreditWindow::Take() {
  if (credits_ == 0) return false;
  --credits_;
  return true;
}

Status CreditWindow::Returned(uint32_t n) {
  if (n > slots_ - credits_)
    return Status(Code::kPeerLost, "ibverbs: the peer returned " + std::to_string(n) +
                                       " credits, only " + std::to_string(slots_ - credits_) +
                                       " were out");
  credits_ += n;
  return Status::Ok();
}

void CreditWindow::Freed(uint32_t n) { owed_ += n; }

uint32_t CreditWindow::TakeOwed(bool piggyback) {
  if (owed_ == 0 || (!piggyback && owed_ < batch_)) return 0;
  const uint32_t n = owed_;
  owed_ = 0;
  return n;
}

}  // namespace tutti::transport::ibverbs
