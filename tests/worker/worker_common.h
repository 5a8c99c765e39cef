// What the test worker's scenarios share: the runtime, output lines, tensors and reference values.
// Uses tutti.h alone, like any application.
#pragma once

#include <tutti/tutti.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace worker {

extern tutti_runtime_t rt;
extern int32_t my_rank, world_size;

// One flushed output line.
void Say(const char* format, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void Die(const char* what, tutti_status_t status);
void Check(const char* what, tutti_status_t status);
// Waits for the harness to write "go" on stdin.
void AwaitGo();
std::vector<int32_t> ParseRanks(const char* text);

extern std::atomic<int> allocations, deallocations;
// tutti_init with TEST_ALLOCATOR and TEST_STATIC_SETS from the environment.
void Init();

struct Tensor {
  std::vector<char> bytes;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;

  Tensor(int32_t dtype, int64_t count, size_t element) : bytes(count * element), shape{count} {
    desc.data = bytes.data();
    desc.dtype = dtype;
    desc.ndim = 1;
    desc.shape = shape.data();
  }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
};

// Submits and waits; on failure prints "status <name> <code> <message>" and returns the status
// with the message kept in `last_failure` (freeing the request clears tutti_last_error()).
extern std::string last_failure;
tutti_status_t Allreduce(const char* name, int32_t set, Tensor& t, int32_t op = TUTTI_OP_SUM,
                         double prescale = 1.0, double postscale = 1.0);
// One float32 allreduce of (rank + i) values on `set`, checked against the members' sum.
void SumOnSet(const char* name, int32_t set, int64_t count = 1000);

uint16_t ToHalf(float f);
float FromHalf(uint16_t h);
uint16_t ToBf16(float f);
float FromBf16(uint16_t b);
// The value rank r contributes at index i: small integers (exact in every dtype), some negative.
double Contribution(int32_t r, int64_t i, int32_t op);
// What rank r contributes at index i of a bool tensor: 0 or a nonzero byte, not always 1.
uint8_t BoolContribution(int32_t r, int64_t i);
// The result at index i of `op` over every rank's Contribution (BoolContribution for bool).
double Expected(int64_t i, int32_t op, int32_t dtype);

struct DTypeInfo {
  int32_t dtype;
  size_t size;
  const char* name;
  std::function<void(void*, int64_t, double)> store;
  std::function<double(const void*, int64_t)> load;
};
const std::vector<DTypeInfo>& AllDTypes();
uint64_t Fnv1a(const void* data, size_t size);
// `count` pseudo-random values in [-1.5, 1.5), different on every rank and the same on every run:
// rounding-sensitive data for the bitwise-identity checks.
Tensor RandomTensor(const DTypeInfo& d, int64_t count, int32_t rank);

}  // namespace worker
