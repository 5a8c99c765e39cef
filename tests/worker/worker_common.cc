#include "worker/worker_common.h"

#include "client/kernels/half.h"  // header-only reference rounding for float16/bfloat16

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace worker {

tutti_runtime_t rt = nullptr;
int32_t my_rank = -1, world_size = 0;

void Say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

[[noreturn]] void Die(const char* what, tutti_status_t status) {
  Say("fail %s: %d %s", what, status, tutti_last_error());
  std::exit(1);
}

void Check(const char* what, tutti_status_t status) {
  if (status != TUTTI_OK) Die(what, status);
}

void AwaitGo() {
  std::string line;
  if (!std::getline(std::cin, line) || line != "go") {
    Say("fail: expected 'go' on stdin");
    std::exit(1);
  }
}

std::vector<int32_t> ParseRanks(const char* text) {
  std::vector<int32_t> ranks;
  for (const char* p = text; *p;) {
    ranks.push_back(static_cast<int32_t>(std::strtol(p, const_cast<char**>(&p), 10)));
    if (*p == ',') ++p;
  }
  return ranks;
}

// A counting allocator (TEST_ALLOCATOR=1): results must come from it and go back to it.
std::atomic<int> allocations{0}, deallocations{0};
namespace {
void* CountingAllocate(size_t bytes, void* user) {
  ++allocations;
  if (user != &allocations) std::abort();
  return std::malloc(bytes);
}
void CountingDeallocate(void* pointer, size_t, void* user) {
  ++deallocations;
  if (user != &allocations) std::abort();
  std::free(pointer);
}
}  // namespace

// Static sets from TEST_STATIC_SETS="0,1;2,3".
void Init() {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  if (std::getenv("TEST_ALLOCATOR")) {
    options.allocate = CountingAllocate;
    options.deallocate = CountingDeallocate;
    options.allocator_user = &allocations;
  }
  std::vector<int32_t> sizes, flat;
  if (const char* spec = std::getenv("TEST_STATIC_SETS")) {
    std::string text(spec);
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(';', start);
      if (end == std::string::npos) end = text.size();
      auto ranks = ParseRanks(text.substr(start, end - start).c_str());
      sizes.push_back(static_cast<int32_t>(ranks.size()));
      flat.insert(flat.end(), ranks.begin(), ranks.end());
      start = end + 1;
    }
    options.num_static_sets = static_cast<int32_t>(sizes.size());
    options.static_set_sizes = sizes.data();
    options.static_set_ranks = flat.data();
  }
  Check("init", tutti_init(&options, &rt));
  Check("rank", tutti_rank(rt, &my_rank));
  Check("size", tutti_size(rt, &world_size));
}

// Submits and waits; on failure prints "status <name> <code> <message>" and returns the status
// with the message kept in `last_failure` (freeing the request clears tutti_last_error()).
std::string last_failure;
tutti_status_t Allreduce(const char* name, int32_t set, Tensor& t, int32_t op,
                         double prescale, double postscale) {
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = op;
  options.prescale_factor = prescale;
  options.postscale_factor = postscale;
  tutti_request_t request = nullptr;
  tutti_status_t status = tutti_allreduce(rt, name, set, &t.desc, &t.desc, &options, &request);
  if (status == TUTTI_OK) {
    status = tutti_request_wait(request, -1);
    last_failure = tutti_last_error();
    tutti_request_free(request);
  } else {
    last_failure = tutti_last_error();
  }
  if (status != TUTTI_OK) Say("status %s %d %s", name, status, last_failure.c_str());
  return status;
}

// One float32 allreduce of (rank + i) values on `set`, checked against the members' sum.
void SumOnSet(const char* name, int32_t set, int64_t count) {
  Tensor t(TUTTI_DTYPE_FLOAT32, count, 4);
  for (int64_t i = 0; i < count; ++i) t.as<float>()[i] = static_cast<float>(my_rank + i);
  Check(name, Allreduce(name, set, t));
  int32_t members[1024], n = 0;
  Check("ranks", tutti_process_set_ranks(rt, set, members, 1024, &n));
  int64_t rank_sum = 0;
  for (int32_t i = 0; i < n; ++i) rank_sum += members[i];
  for (int64_t i = 0; i < count; ++i)
    if (t.as<float>()[i] != static_cast<float>(rank_sum + n * i)) {
      Say("fail %s: element %lld is %f, expected %lld", name, static_cast<long long>(i),
          t.as<float>()[i], static_cast<long long>(rank_sum + n * i));
      std::exit(1);
    }
}

// ---- value helpers for the dtype matrix ----------------------------------------------------------
// Round to nearest even, as the library does (client/kernels/half.h is tested on all bit patterns).
uint16_t ToHalf(float f) { return tutti::FloatToHalf(f); }
float FromHalf(uint16_t h) { return tutti::HalfToFloat(h); }
uint16_t ToBf16(float f) { return tutti::FloatToBFloat16(f); }
float FromBf16(uint16_t b) { return tutti::BFloat16ToFloat(b); }

// The value rank r contributes at index i: small integers (exact in every dtype), some negative.
double Contribution(int32_t r, int64_t i, int32_t op) {
  if (op == TUTTI_OP_PRODUCT) return 1 + (r + i) % 3;       // products stay small
  return static_cast<double>((r * 7 + i * 3) % 11) - 5;     // in [-5, 5]
}

// Bytes 0 (a third of them), 1, and others with no bit in common (2, 0x80, 0xfd), so that an
// "and" done bitwise, or a result left as the winning byte, shows.
// Hashed, so that ranks agree and disagree in every combination ("and" true, "or" false).
uint8_t BoolContribution(int32_t r, int64_t i) {
  static const uint8_t kBytes[] = {0, 1, 2, 0, 0x80, 0xfd};
  uint64_t x = (static_cast<uint64_t>(r) + 1) * 0x9e3779b97f4a7c15ull ^
               (static_cast<uint64_t>(i) + 1) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return kBytes[x % 6];
}

double Expected(int64_t i, int32_t op, int32_t dtype) {
  if (dtype == TUTTI_DTYPE_BOOL) {  // "or" for sum and max, "and" for min and product
    const bool all = op == TUTTI_OP_MIN || op == TUTTI_OP_PRODUCT;
    bool acc = all;
    for (int32_t r = 0; r < world_size; ++r)
      acc = all ? acc && BoolContribution(r, i) != 0 : acc || BoolContribution(r, i) != 0;
    return acc ? 1 : 0;
  }
  double acc = Contribution(0, i, op);
  for (int32_t r = 1; r < world_size; ++r) {
    double v = Contribution(r, i, op);
    switch (op) {
      case TUTTI_OP_SUM: case TUTTI_OP_AVERAGE: acc += v; break;
      case TUTTI_OP_MIN: acc = std::min(acc, v); break;
      case TUTTI_OP_MAX: acc = std::max(acc, v); break;
      case TUTTI_OP_PRODUCT: acc *= v; break;
    }
  }
  if (op == TUTTI_OP_AVERAGE) {
    acc /= world_size;
    if (dtype >= TUTTI_DTYPE_INT8) acc = std::trunc(acc);
  }
  if (dtype == TUTTI_DTYPE_UINT8) acc = static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(acc)));
  return acc;
}

namespace {
template <typename T>
DTypeInfo Plain(int32_t dtype, const char* name) {
  return {dtype, sizeof(T), name,
          [](void* p, int64_t i, double v) { static_cast<T*>(p)[i] = static_cast<T>(static_cast<int64_t>(v)); },
          [](const void* p, int64_t i) { return static_cast<double>(static_cast<const T*>(p)[i]); }};
}

}  // namespace

Tensor RandomTensor(const DTypeInfo& d, int64_t count, int32_t rank) {
  Tensor t(d.dtype, count, d.size);
  uint64_t state = 0x9e3779b97f4a7c15ull * (rank + 1);
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    d.store(t.bytes.data(), i, static_cast<double>(state >> 11) / 9007199254740992.0 * 3.0 - 1.5);
  }
  return t;
}

const std::vector<DTypeInfo>& AllDTypes() {
  static const std::vector<DTypeInfo> all = {
      {TUTTI_DTYPE_FLOAT16, 2, "float16",
       [](void* p, int64_t i, double v) { static_cast<uint16_t*>(p)[i] = ToHalf(static_cast<float>(v)); },
       [](const void* p, int64_t i) { return static_cast<double>(FromHalf(static_cast<const uint16_t*>(p)[i])); }},
      {TUTTI_DTYPE_BFLOAT16, 2, "bfloat16",
       [](void* p, int64_t i, double v) { static_cast<uint16_t*>(p)[i] = ToBf16(static_cast<float>(v)); },
       [](const void* p, int64_t i) { return static_cast<double>(FromBf16(static_cast<const uint16_t*>(p)[i])); }},
      {TUTTI_DTYPE_FLOAT32, 4, "float32",
       [](void* p, int64_t i, double v) { static_cast<float*>(p)[i] = static_cast<float>(v); },
       [](const void* p, int64_t i) { return static_cast<double>(static_cast<const float*>(p)[i]); }},
      {TUTTI_DTYPE_FLOAT64, 8, "float64",
       [](void* p, int64_t i, double v) { static_cast<double*>(p)[i] = v; },
       [](const void* p, int64_t i) { return static_cast<const double*>(p)[i]; }},
      Plain<int8_t>(TUTTI_DTYPE_INT8, "int8"),
      Plain<uint8_t>(TUTTI_DTYPE_UINT8, "uint8"),
      Plain<int32_t>(TUTTI_DTYPE_INT32, "int32"),
      Plain<int64_t>(TUTTI_DTYPE_INT64, "int64"),
      Plain<int16_t>(TUTTI_DTYPE_INT16, "int16"),
      // Raw bytes both ways: tests store nonzero bytes other than 1 on purpose (moves keep them,
      // reductions make them 1).
      Plain<uint8_t>(TUTTI_DTYPE_BOOL, "bool"),
  };
  return all;
}

uint64_t Fnv1a(const void* data, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  return hash;
}

}  // namespace worker
