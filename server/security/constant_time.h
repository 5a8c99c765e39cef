// Comparing secrets (job tokens) without leaking through timing how much of a guess was right.
#pragma once

#include <cstddef>
#include <string>

namespace tutti::server {

// True when `a` equals `b`. The time depends on the lengths only, never on where the strings
// differ: every byte of the longer one is read whatever the others hold.
inline bool SameSecret(const std::string& a, const std::string& b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    differ |= static_cast<unsigned char>(x ^ y);
  }
  // volatile keeps the compiler from turning the loop into an early-exit comparison.
  volatile unsigned char result = differ;
  return result == 0;
}

}  // namespace tutti::server
