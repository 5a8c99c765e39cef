// Random element values shared by the reduce and scale tests: mostly ordinary numbers, with the
// edge values (NaN, infinities, signed zeros, integer extremes) the kernels must get right.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>

namespace tutti::test_values {

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (rng() % 16) {
      case 0: return std::numeric_limits<T>::quiet_NaN();
      case 1: return -std::numeric_limits<T>::infinity();
      case 2: return 0;
      case 3: return -T(0);
      case 4: return std::numeric_limits<T>::max();
      default: return static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    }
  } else {
    switch (rng() % 8) {
      case 0: return std::numeric_limits<T>::min();
      case 1: return std::numeric_limits<T>::max();
      case 2: return static_cast<T>(-1);
      case 3: return 0;
      case 4: return static_cast<T>(rng() % 7);  // small: products that do not wrap
      default: return static_cast<T>(rng());    // full range: sums and products that wrap
    }
  }
}

}  // namespace tutti::test_values
