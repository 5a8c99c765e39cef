// Scenarios of the allreduce tests (tests/multiproc/allreduce_test.cc): every dtype and op checked
// exactly, bool's refused average, scale factors on floating and integer types, and results that
// must be bitwise identical on every rank, in place and out of place.
#include <tutti/tutti.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/collective_checks.h"
#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Integers scale as Horovod scales them: every input (T)(x * prescale), the sum of those, then
// (T)(sum * postscale), truncating toward zero; an average divides (truncating) before the
// postscale. Allreduce and reducescatter; prints "int scaled ok".
int IntegerScaling() {
  const int32_t n = world_size;
  // The case: int32 [1, 2, 3] with prescale 0.5 on every rank is [0, 1, 1] each.
  Tensor ints(TUTTI_DTYPE_INT32, 3, 4);
  for (int i = 0; i < 3; ++i) ints.as<int32_t>()[i] = i + 1;
  Check("int.scaled", Allreduce("int.scaled", TUTTI_WORLD, ints, TUTTI_OP_SUM, 0.5, 1.5));
  const int32_t scaled[] = {0, 1, 1};
  for (int i = 0; i < 3; ++i) {
    const int32_t want = static_cast<int32_t>(std::trunc(n * scaled[i] * 1.5));
    if (ints.as<int32_t>()[i] != want)
      return Say("fail int.scaled[%d]: got %d, expected %d", i, ints.as<int32_t>()[i], want), 1;
  }
  // int16 average with a postscale: (sum / n truncated) * 0.5 truncated, not sum * 0.5 / n.
  Tensor shorts(TUTTI_DTYPE_INT16, 5, 2);
  auto short_value = [](int32_t r, int i) { return static_cast<int16_t>(7 * (r + 1) - 9 * i); };
  for (int i = 0; i < 5; ++i) shorts.as<int16_t>()[i] = short_value(my_rank, i);
  Check("int16.average", Allreduce("int16.average", TUTTI_WORLD, shorts, TUTTI_OP_AVERAGE, 1.0, 0.5));
  for (int i = 0; i < 5; ++i) {
    int64_t sum = 0;
    for (int32_t r = 0; r < n; ++r) sum += short_value(r, i);
    const auto want = static_cast<int16_t>(std::trunc(static_cast<double>(sum / n) * 0.5));
    if (shorts.as<int16_t>()[i] != want)
      return Say("fail int16.average[%d]: got %d, expected %d", i, shorts.as<int16_t>()[i], want), 1;
  }
  // Reducescatter of int64, two rows each, prescale and postscale.
  Tensor rows(TUTTI_DTYPE_INT64, 2 * n, 8);
  auto row_value = [](int32_t r, int64_t i) { return static_cast<int64_t>(3 * r + 5 * i - 4); };
  for (int64_t i = 0; i < 2 * n; ++i) rows.as<int64_t>()[i] = row_value(my_rank, i);
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.prescale_factor = 0.5;
  options.postscale_factor = 3.0;
  tutti_request_t request;
  Check("int64.rs", tutti_reducescatter(rt, "int64.rs", TUTTI_WORLD, &rows.desc, &options, &request));
  if (Finish(request, "int64.rs") != TUTTI_OK) return 1;
  std::vector<int64_t> shape;
  const std::vector<double> got = Output(request, AllDTypes()[TUTTI_DTYPE_INT64 - 1], &shape);
  tutti_request_free(request);
  std::vector<double> want;
  for (int64_t i = 2 * my_rank; i < 2 * my_rank + 2; ++i) {
    int64_t sum = 0;
    for (int32_t r = 0; r < n; ++r) sum += static_cast<int64_t>(std::trunc(row_value(r, i) * 0.5));
    want.push_back(static_cast<double>(sum * 3));
  }
  if (!Expect("int64.rs", got, want)) return 1;
  Say("int scaled ok");
  return 0;
}

// Every dtype x op on the world, checked exactly (bool on bytes that are not all 0 or 1); bool's
// average refused at submission: prints "refused <status> <message>"; then "matrix ok".
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
        if (d.dtype == TUTTI_DTYPE_BOOL && op == TUTTI_OP_AVERAGE) continue;  // refused: below
        Tensor t(d.dtype, count, d.size);
        for (int64_t i = 0; i < count; ++i) {
          double v = d.dtype == TUTTI_DTYPE_BOOL ? BoolContribution(my_rank, i) : Contribution(my_rank, i, op);
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
  Tensor flags(TUTTI_DTYPE_BOOL, 3, 1);
  const tutti_status_t refused = Allreduce("bool.average", TUTTI_WORLD, flags, TUTTI_OP_AVERAGE);
  Say("refused %d %s", refused, last_failure.c_str());
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
  if (IntegerScaling() != 0) return 1;

  // Bitwise identity: rounding-sensitive random data, averaged; every rank must print one hash.
  for (int32_t dtype : {TUTTI_DTYPE_FLOAT32, TUTTI_DTYPE_FLOAT64, TUTTI_DTYPE_FLOAT16, TUTTI_DTYPE_BFLOAT16}) {
    const DTypeInfo& d = AllDTypes()[dtype - 1];
    Tensor t = RandomTensor(d, 100003, my_rank);
    std::string name = std::string("random.") + d.name;
    Check(name.c_str(), Allreduce(name.c_str(), TUTTI_WORLD, t, TUTTI_OP_AVERAGE, 1.0, 1.5));
    Say("hash %s %016llx", d.name, static_cast<unsigned long long>(Fnv1a(t.bytes.data(), t.bytes.size())));
    // The same input out of place (output != input, starting as garbage): the same bits, and the
    // input left as it was.
    Tensor in = RandomTensor(d, 100003, my_rank), out(dtype, 100003, d.size);
    std::fill(out.bytes.begin(), out.bytes.end(), static_cast<char>(0xA5));
    tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
    options.reduce_op = TUTTI_OP_AVERAGE;
    options.prescale_factor = 0.75;
    options.postscale_factor = 2.0;
    tutti_request_t request;
    const std::string oop = name + ".out_of_place";
    Check(oop.c_str(), tutti_allreduce(rt, oop.c_str(), TUTTI_WORLD, &in.desc, &out.desc, &options, &request));
    if (Finish(request, oop) != TUTTI_OK) return 1;
    tutti_request_free(request);
    if (in.bytes != RandomTensor(d, 100003, my_rank).bytes)
      return Say("fail %s: the input changed", oop.c_str()), 1;
    // Against the same collective in place.
    Tensor again = RandomTensor(d, 100003, my_rank);
    Check(oop.c_str(), Allreduce(oop.c_str(), TUTTI_WORLD, again, TUTTI_OP_AVERAGE, 0.75, 2.0));
    if (out.bytes != again.bytes) return Say("fail %s: differs from in place", oop.c_str()), 1;
  }
  return 0;
}

const ScenarioRegistrar registered = {
    {"matrix", DTypeMatrix},
};

}  // namespace
}  // namespace worker
