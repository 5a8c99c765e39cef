// The adaptive compression policy (docs/compression.md): per tensor, which compressor its next
// allreduces use. A pure function of what every member of the set holds bit for bit: the
// tensor's size, the settings (compared by tuttid), how many allreduces of it this set ran, and
// the norms of their reduced results. So every member reaches the same choice at the same
// allreduce without a message: the agreement is the allreduce itself.
//
// Rule: a tensor's first `interval` allreduces run exact. Then, before every interval-th one,
// the policy revisits: the tensor is compressed for the next `interval` allreduces when it is at
// least `min_bytes` and the norms of its reduced results over the interval just ended spread by
// at most `max_change` of the largest ((max - min) / max); otherwise it runs exact. The spread,
// not first against last, so that a norm swinging in step with the interval is not taken for
// a stable one.
// Large, slowly changing gradients are compressed; small or fast-moving ones stay exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "client/compress/codecs.h"

namespace tutti::client::compress {

struct AdaptiveSettings {
  Kind compressor = Kind::kBf16;  // what a compressed tensor uses
  int32_t interval = 10;
  int64_t min_bytes = 65536;
  double max_change = 0.2;
};

// One revisit's outcome, for the timeline and counters.
struct Decision {
  uint64_t allreduce = 0;  // the index (from 0) of the tensor's allreduce it applies from
  Kind choice = Kind::kNone;
  double change = 0;       // the spread of the norm over the interval, (max - min) / max
};

// One tensor's history in one set. Not thread-safe: the set's lane owns it.
class TensorPolicy {
 public:
  // Before an allreduce of `bytes`: the compressor to use (kNone: exact), and, where this is a
  // revisit, what was decided.
  Kind Choose(const AdaptiveSettings& settings, size_t bytes, std::optional<Decision>* revisit);
  // After it: the norm of the reduced result (computed alike on every member).
  void Observe(const AdaptiveSettings& settings, double norm);

 private:
  uint64_t allreduces_ = 0;
  double min_norm_ = 0, max_norm_ = 0;  // over the current interval
  Kind choice_ = Kind::kNone;
};

// (max - min) / max of norms (>= 0); 0 where max is 0.
double Spread(double min, double max);

// The L2 norm of `n` floats, summed in index order in double: the same bits on every member
// that holds the same values.
double Norm(const float* values, size_t n);

}  // namespace tutti::client::compress
