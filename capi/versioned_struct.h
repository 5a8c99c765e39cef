// Reading and writing the caller's versioned structs. Each public struct starts with a size_t
// struct_size that its _INIT macro sets to the size the caller compiled against, so a caller
// built against another minor version than the library still agrees with it on how much of the
// struct exists. The caller owns both structs; nothing here keeps a pointer to them.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "capi/status_text.h"

namespace tutti::capi {

// Copies what the caller's struct_size covers over `defaults`: older callers get defaults for
// fields appended after they compiled, newer callers' extra fields are ignored.
template <typename T>
tutti_status_t ReadVersioned(const T* given, const T& defaults, const char* what, T* out) {
  if (given->struct_size < sizeof(size_t))
    return Invalid(std::string(what) + ".struct_size is " + std::to_string(given->struct_size) +
                   "; initialize the struct with its _INIT macro");
  *out = defaults;
  std::memcpy(out, given, std::min(given->struct_size, sizeof(T)));
  out->struct_size = sizeof(T);
  return TUTTI_OK;
}

// Copies `values` into the caller's struct, as much of it as the caller's struct_size covers.
template <typename T>
tutti_status_t WriteVersioned(const T& values, T* out, const char* what) {
  if (out->struct_size < sizeof(size_t))
    return Invalid(std::string(what) + ".struct_size is " + std::to_string(out->struct_size) +
                   "; initialize the struct with its _INIT macro");
  const size_t size = std::min(out->struct_size, sizeof(T));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&values) + sizeof(size_t), size - sizeof(size_t));
  return TUTTI_OK;
}

}  // namespace tutti::capi
