// Scenarios of the allreduce tests (tests/multiproc/allreduce_test.cc): every dtype and op checked
// exactly, scale factors, and results that must be bitwise identical on every rank.
#include <tutti/tutti.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Every dtype x op on the world, checked exactly; prints "matrix ok".
// Then float averages of pseudo-random data with scale factors; prints "hash <fnv>" that the
// harness compares across ranks (bitwise-identical results).
int DTypeMatrix() {
  const int32_t ops[] = {TUTTI_OP_SUM, TUTTI_OP_AVERAGE, TUTTI_OP_MIN, TUTTI_OP_MAX, TUTTI_OP_PRODUCT};
  const char* op_names[] = {"", "sum", "average", "min", "max", "product"};
  const int64_t counts[] = {0, 1, 3, 1027};
  for (const DTypeInfo& d : AllDTypes())
    for (int32_t op : ops)
      for (int64_t count : counts) {
        if (d.dtype == TUTTI_DTYPE_UINT8 && op != TUTTI_OP_PRODUCT && op != TUTTI_OP_MAX && op != TUTTI_OP_SUM)
          continue;  // negative contributions do not fit uint8 min/average
        Tensor t(d.dtype, count, d.size);
        for (int64_t i = 0; i < count; ++i) {
          double v = Contribution(my_rank, i, op);
          if (d.dtype == TUTTI_DTYPE_UINT8) v = static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
          d.store(t.bytes.data(), i, v);
        }
        std::string name = std::string(d.name) + "." + op_names[op] + "." + std::to_string(count);
        Check(name.c_str(), Allreduce(name.c_str(), TUTTI_WORLD, t, op));
        for (int64_t i = 0; i < count; ++i) {
          double expected = Expected(i, op, d.dtype);
          if (d.dtype == TUTTI_DTYPE_UINT8) {
            // uint8 contributions wrapped mod 256: recompute in that arithmetic.
            int64_t acc = op == TUTTI_OP_PRODUCT ? 1 : 0;
            for (int32_t r = 0; r < world_size; ++r) {
              uint8_t v = static_cast<uint8_t>(static_cast<int64_t>(Contribution(r, i, op)));
              if (op == TUTTI_OP_SUM) acc = static_cast<uint8_t>(acc + v);
              else if (op == TUTTI_OP_PRODUCT) acc = static_cast<uint8_t>(acc * v);
              else acc = std::max<int64_t>(acc, v);
            }
            expected = static_cast<double>(acc);
          }
          double got = d.load(t.bytes.data(), i);
          if (got != expected) {
            Say("fail %s[%lld]: got %g, expected %g", name.c_str(), static_cast<long long>(i), got, expected);
            return 1;
          }
        }
      }
  Say("matrix ok");

  // Scale factors: (sum of 2*x) * 0.25 = average-like, exact for these values.
  Tensor scaled(TUTTI_DTYPE_FLOAT32, 17, 4);
  for (int i = 0; i < 17; ++i) scaled.as<float>()[i] = static_cast<float>(my_rank + i);
  Check("scaled", Allreduce("scaled", TUTTI_WORLD, scaled, TUTTI_OP_SUM, 2.0, 0.25));
  int64_t rank_sum = static_cast<int64_t>(world_size) * (world_size - 1) / 2;
  for (int i = 0; i < 17; ++i) {
    float expected = static_cast<float>((rank_sum + world_size * i) * 2 * 0.25);
    if (scaled.as<float>()[i] != expected) {
      Say("fail scaled[%d]: got %f, expected %f", i, scaled.as<float>()[i], expected);
      return 1;
    }
  }
  Say("scaled ok");

  // Bitwise identity: rounding-sensitive random data, averaged; every rank must print one hash.
  for (int32_t dtype : {TUTTI_DTYPE_FLOAT32, TUTTI_DTYPE_FLOAT64, TUTTI_DTYPE_FLOAT16, TUTTI_DTYPE_BFLOAT16}) {
    const DTypeInfo& d = AllDTypes()[dtype - 1];
    Tensor t(dtype, 100003, d.size);
    uint64_t state = 0x9e3779b97f4a7c15ull * (my_rank + 1);
    for (int64_t i = 0; i < 100003; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      d.store(t.bytes.data(), i, static_cast<double>(state >> 11) / 9007199254740992.0 * 3.0 - 1.5);
    }
    std::string name = std::string("random.") + d.name;
    Check(name.c_str(), Allreduce(name.c_str(), TUTTI_WORLD, t, TUTTI_OP_AVERAGE, 1.0, 1.5));
    Say("hash %s %016llx", d.name, static_cast<unsigned long long>(Fnv1a(t.bytes.data(), t.bytes.size())));
  }
  return 0;
}

const ScenarioRegistrar registered = {
    {"matrix", DTypeMatrix},
};

}  // namespace
}  // namespace worker
