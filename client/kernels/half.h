// IEEE binary16 and bfloat16 conversions, done on the bits so that results do not depend on the
// CPU (F16C or not) or on the floating-point environment's rounding mode.
#pragma once

#include <cstdint>
#include <cstring>

namespace tutti {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Drops the low `shift` bits of `value`, rounding to nearest, ties to even.
inline uint32_t ShiftRightRoundEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  return kept;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffff;
  int exp = static_cast<int>(abs >> 23);
  if (exp == 0xff) {
    if (abs == 0x7f800000) return sign | 0x7c00;
    // Keep the payload's top bits so half NaNs round-trip; a payload that lives only in the
    // dropped bits gets the quiet bit so the result is still a NaN, not infinity.
    uint32_t payload = (abs >> 13) & 0x3ff;
    return static_cast<uint16_t>(sign | 0x7c00 | (payload ? payload : 0x200));
  }
  if (exp >= 127 + 16) return sign | 0x7c00;  // >= 65536; 65520..65535 overflow via rounding
  if (exp >= 127 - 14) {
    // Rebias in place; a rounding carry out of the mantissa correctly bumps the exponent,
    // up to and including infinity (0x7c00).
    return static_cast<uint16_t>(sign | ShiftRightRoundEven(abs - ((127 - 15) << 23), 13));
  }
  if (exp < 127 - 25) return sign;  // below 2^-25: under half the smallest subnormal
  // Subnormal half: the value is mantissa * 2^-24. A carry to 0x400 is the smallest normal.
  uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
  return static_cast<uint16_t>(sign | ShiftRightRoundEven(mantissa, 126 - exp));
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000 | (mantissa << 13));
  if (exp != 0) return BitsToFloat(sign | ((exp + 127 - 15) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);
  // Subnormal half: normalize, since every half subnormal is a normal float.
  exp = 127 - 14;
  while (!(mantissa & 0x400)) {
    mantissa <<= 1;
    --exp;
  }
  return BitsToFloat(sign | (exp << 23) | ((mantissa & 0x3ff) << 13));
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffff) > 0x7f800000) {
    // Rounding could carry a NaN into infinity or the sign; truncate, keeping it a NaN.
    uint16_t top = static_cast<uint16_t>(u >> 16);
    return (top & 0x7f) ? top : static_cast<uint16_t>(top | 0x40);
  }
  // Round to nearest even on the dropped 16 bits; overflow carries into infinity naturally.
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

inline float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

}  // namespace tutti
