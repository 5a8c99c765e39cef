#include "client/compress/adaptive_policy.h"

#include <cmath>
#include <algorithm>

namespace tutti::client::compress {

double Spread(double min, double max) { return max == 0 ? 0 : (max - min) / max; }

double Norm(const float* values, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(values[i]) * values[i];
  return std::sqrt(sum);
}

Kind TensorPolicy::Choose(const AdaptiveSettings& settings, size_t bytes,
                          std::optional<Decision>* revisit) {
  revisit->reset();
  const uint64_t interval = static_cast<uint64_t>(settings.interval);
  if (allreduces_ > 0 && allreduces_ % interval == 0) {
    const double change = Spread(min_norm_, max_norm_);
    const bool compress = static_cast<int64_t>(bytes) >= settings.min_bytes && change <= settings.max_change;
    choice_ = compress ? settings.compressor : Kind::kNone;
    *revisit = Decision{allreduces_, choice_, change};
  }
  return choice_;
}

void TensorPolicy::Observe(const AdaptiveSettings& settings, double norm) {
  if (allreduces_ % static_cast<uint64_t>(settings.interval) == 0) min_norm_ = max_norm_ = norm;
  min_norm_ = std::min(min_norm_, norm);
  max_norm_ = std::max(max_norm_, norm);
  ++allreduces_;
}

}  // namespace tutti::client::compress
