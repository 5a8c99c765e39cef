// The join scenario of tests/multiproc/collectives_test.cc: ranks with uneven amounts of data
// that join once theirs runs out, checked against the ranks still active at each step.
#include <tutti/tutti.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/collective_checks.h"
#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Uneven data on a world of 3: rank r has 2 + 2r steps, each an allreduce sum, min, max and
// average, an allgather and a broadcast from rank 2; then it joins. Every result is checked
// against the ranks still active at that step. Prints "joined <last rank>".
int JoinUneven() {
  const int steps = 2 + 2 * my_rank;
  auto active = [](int r, int s) { return s < 2 + 2 * r; };
  const DTypeInfo& f32 = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
  const DTypeInfo& i32 = AllDTypes()[TUTTI_DTYPE_INT32 - 1];
  const DTypeInfo& f64 = AllDTypes()[TUTTI_DTYPE_FLOAT64 - 1];
  const DTypeInfo& i64 = AllDTypes()[TUTTI_DTYPE_INT64 - 1];
  for (int s = 0; s < steps; ++s) {
    Tensor sum(TUTTI_DTYPE_FLOAT32, 5, 4), mn(TUTTI_DTYPE_INT32, 3, 4), mx(TUTTI_DTYPE_FLOAT64, 2, 8),
        avg(TUTTI_DTYPE_FLOAT32, 1, 4), bcast(TUTTI_DTYPE_FLOAT32, 4, 4);
    for (int i = 0; i < 5; ++i) f32.store(sum.bytes.data(), i, (my_rank + 1) * (s + 1) + i);
    for (int i = 0; i < 3; ++i) i32.store(mn.bytes.data(), i, (10 - my_rank) * (s + 1) + i);
    for (int i = 0; i < 2; ++i) f64.store(mx.bytes.data(), i, my_rank * s - i);
    f32.store(avg.bytes.data(), 0, 3.0 * (my_rank + 1));
    if (my_rank == 2)
      for (int i = 0; i < 4; ++i) f32.store(bcast.bytes.data(), i, s * 1000 + i);
    Tensor rows = Filled(i64, {my_rank + 1}, my_rank);
    for (int i = 0; i <= my_rank; ++i) i64.store(rows.bytes.data(), i, my_rank * 100 + s);
    tutti_allreduce_options_t min_op = TUTTI_ALLREDUCE_OPTIONS_INIT, max_op = min_op, avg_op = min_op;
    min_op.reduce_op = TUTTI_OP_MIN;
    max_op.reduce_op = TUTTI_OP_MAX;
    avg_op.reduce_op = TUTTI_OP_AVERAGE;
    tutti_request_t r[6];
    const std::string n = std::to_string(s);
    Check("sum", tutti_allreduce(rt, ("sum" + n).c_str(), TUTTI_WORLD, &sum.desc, &sum.desc, nullptr, &r[0]));
    Check("min", tutti_allreduce(rt, ("min" + n).c_str(), TUTTI_WORLD, &mn.desc, &mn.desc, &min_op, &r[1]));
    Check("max", tutti_allreduce(rt, ("max" + n).c_str(), TUTTI_WORLD, &mx.desc, &mx.desc, &max_op, &r[2]));
    Check("avg", tutti_allreduce(rt, ("avg" + n).c_str(), TUTTI_WORLD, &avg.desc, &avg.desc, &avg_op, &r[3]));
    Check("gather", tutti_allgather(rt, ("gather" + n).c_str(), TUTTI_WORLD, &rows.desc, &r[4]));
    Check("bcast", tutti_broadcast(rt, ("bcast" + n).c_str(), TUTTI_WORLD, &bcast.desc, 2, &r[5]));
    for (auto& request : r)
      if (Finish(request, "step " + n) != TUTTI_OK) return 1;
    double want_sum[5] = {}, want_avg = 0, want_min[3], want_max[2];
    std::vector<double> want_rows;
    for (int i = 0; i < 3; ++i) want_min[i] = 1e9;
    for (int i = 0; i < 2; ++i) want_max[i] = -1e9;
    for (int c = 0; c < 3; ++c) {
      if (!active(c, s)) continue;
      for (int i = 0; i < 5; ++i) want_sum[i] += (c + 1) * (s + 1) + i;
      for (int i = 0; i < 3; ++i) want_min[i] = std::min<double>(want_min[i], (10 - c) * (s + 1) + i);
      for (int i = 0; i < 2; ++i) want_max[i] = std::max<double>(want_max[i], c * s - i);
      want_avg += 3.0 * (c + 1);
      for (int i = 0; i <= c; ++i) want_rows.push_back(c * 100 + s);
    }
    bool ok = f32.load(avg.bytes.data(), 0) == static_cast<float>(want_avg) * static_cast<float>(1.0 / 3);
    for (int i = 0; i < 5; ++i) ok = ok && f32.load(sum.bytes.data(), i) == want_sum[i];
    for (int i = 0; i < 3; ++i) ok = ok && i32.load(mn.bytes.data(), i) == want_min[i];
    for (int i = 0; i < 2; ++i) ok = ok && f64.load(mx.bytes.data(), i) == want_max[i];
    for (int i = 0; i < 4; ++i) ok = ok && f32.load(bcast.bytes.data(), i) == s * 1000 + i;
    std::vector<int64_t> shape;
    ok = ok && Output(r[4], i64, &shape) == want_rows;
    for (auto& request : r) tutti_request_free(request);
    if (!ok) return Say("fail: step %d results", s), 1;
  }
  int32_t last = -1;
  Check("join", tutti_join(rt, TUTTI_WORLD, 0, &last));
  Say("joined %d", last);
  return 0;
}

const ScenarioRegistrar registered = {
    {"join", JoinUneven},
};

}  // namespace
}  // namespace worker
