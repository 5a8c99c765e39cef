// AddressLimiter: a token bucket per client address, so that one host registering in a loop is
// slowed down without touching the others (docs/security.md, "Floods"). Single-threaded.
#pragma once

#include <string>
#include <unordered_map>

#include <algorithm>
#include <chrono>

#include "server/core/process_set_table.h"  // Clock

namespace tutti::server {

class AddressLimiter {
 public:
  // `rate` tokens a second, at most `burst` saved up; rate <= 0 disables the limit.
  AddressLimiter(double rate, double burst) : rate_(rate), burst_(burst) {}

  // Takes a token from `address`'s bucket; false when it is empty.
  bool Allow(const std::string& address, Clock::time_point now) {
    if (rate_ <= 0) return true;
    // Buckets that refilled are the same as absent ones: drop them before the table grows large.
    if (buckets_.size() >= kMaxTracked) Forget(now);
    auto [it, fresh] = buckets_.try_emplace(address, Bucket{burst_, now});
    Bucket& b = it->second;
    b.tokens = std::min(burst_, b.tokens + rate_ * std::chrono::duration<double>(now - b.at).count());
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  double rate() const { return rate_; }

 private:
  static constexpr size_t kMaxTracked = 1 << 16;
  struct Bucket {
    double tokens;
    Clock::time_point at;
  };
  void Forget(Clock::time_point now) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      const double full = it->second.tokens +
                          rate_ * std::chrono::duration<double>(now - it->second.at).count();
      it = full >= burst_ ? buckets_.erase(it) : std::next(it);
    }
    // Every address still has an empty bucket: start over rather than grow without bound.
    if (buckets_.size() >= kMaxTracked) buckets_.clear();
  }

  double rate_, burst_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace tutti::server
