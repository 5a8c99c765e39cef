// Scenarios of the hierarchical allreduce tests (tests/multiproc/hierarchical_test.cc): ranks on
// emulated hosts (network namespaces), two per host, consecutive ranks on one host. Exact sums,
// minima and maxima of several dtypes, below and above the hierarchy's threshold, with counts
// that do not divide evenly; fused tensors; and rounding-sensitive averages whose hash the
// harness compares across ranks (bitwise-identical results).
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

// Sum, min or max of Value over every rank, exactly.
double ExpectedOf(const DTypeInfo& d, int32_t op, int64_t i) {
  double acc = Value(d, 0, i);
  for (int32_t r = 1; r < world_size; ++r) {
    const double v = Value(d, r, i);
    acc = op == TUTTI_OP_SUM ? acc + v : op == TUTTI_OP_MIN ? std::min(acc, v) : std::max(acc, v);
  }
  return acc;
}

bool CheckExact(const DTypeInfo& d, int32_t op, int64_t count, const std::string& name) {
  Tensor t(d.dtype, count, d.size);
  for (int64_t i = 0; i < count; ++i) d.store(t.bytes.data(), i, Value(d, my_rank, i));
  if (Allreduce(name.c_str(), TUTTI_WORLD, t, op) != TUTTI_OK) return false;
  for (int64_t i = 0; i < count; ++i) {
    const double got = d.load(t.bytes.data(), i), want = ExpectedOf(d, op, i);
    if (got != want) {
      Say("fail %s[%lld]: got %g, expected %g", name.c_str(), static_cast<long long>(i), got, want);
      return false;
    }
  }
  return true;
}

// Rank r's allgather contribution to tensor k: 0 rows for rank 1, else 2000 + 700 r + k rows of
// 3 floats.
int64_t GatherRows(int32_t rank, int k) { return rank == 1 ? 0 : 2000 + 700 * rank + k; }

bool CheckGathered(tutti_request_t request, const DTypeInfo& d, int k, const std::string& what) {
  std::vector<int64_t> shape;
  const std::vector<double> got = Output(request, d, &shape);
  std::vector<double> want;
  for (int32_t r = 0; r < world_size; ++r)
    for (int64_t i = 0; i < GatherRows(r, k) * 3; ++i) want.push_back(Value(d, r, i + k));
  return Expect(what, got, want);
}

bool CheckOthers() {
  const DTypeInfo& d = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
  // Allgathers: one alone, then four submitted together (fused).
  for (int batch : {1, 4}) {
    std::vector<Tensor> parts;
    std::vector<tutti_request_t> requests;
    for (int k = 0; k < batch; ++k) {
      parts.emplace_back(TUTTI_DTYPE_FLOAT32, GatherRows(my_rank, k) * 3, 4);
      parts.back().shape = {GatherRows(my_rank, k), 3};
      parts.back().desc.ndim = 2;
      parts.back().desc.shape = parts.back().shape.data();
      for (int64_t i = 0; i < GatherRows(my_rank, k) * 3; ++i)
        d.store(parts.back().bytes.data(), i, Value(d, my_rank, i + k));
    }
    for (int k = 0; k < batch; ++k) {
      tutti_request_t request = nullptr;
      const std::string name = "gather." + std::to_string(batch) + "." + std::to_string(k);
      Check("allgather", tutti_allgather(rt, name.c_str(), TUTTI_WORLD, &parts[k].desc, &request));
      requests.push_back(request);
    }
    for (int k = 0; k < batch; ++k) {
      const std::string what = "gather." + std::to_string(batch) + "." + std::to_string(k);
      if (Finish(requests[k], what) != TUTTI_OK || !CheckGathered(requests[k], d, k, what)) return false;
      tutti_request_free(requests[k]);
    }
  }
  // Reducescatter of 50001 rows of 2: the first rows % n members get one more.
  const int64_t rows = 50001;
  Tensor input(TUTTI_DTYPE_FLOAT32, rows * 2, 4);
  input.shape = {rows, 2};
  input.desc.ndim = 2;
  input.desc.shape = input.shape.data();
  for (int64_t i = 0; i < rows * 2; ++i) d.store(input.bytes.data(), i, Value(d, my_rank, i));
  tutti_request_t request = nullptr;
  Check("reducescatter", tutti_reducescatter(rt, "scatter", TUTTI_WORLD, &input.desc, nullptr, &request));
  if (Finish(request, "scatter") != TUTTI_OK) return false;
  int64_t first = 0;
  for (int32_t r = 0; r < my_rank; ++r) first += rows / world_size + (r < rows % world_size ? 1 : 0);
  const int64_t mine = rows / world_size + (my_rank < rows % world_size ? 1 : 0);
  std::vector<double> want;
  for (int64_t i = first * 2; i < (first + mine) * 2; ++i) want.push_back(ExpectedOf(d, TUTTI_OP_SUM, i));
  std::vector<int64_t> shape;
  if (!Expect("scatter", Output(request, d, &shape), want)) return false;
  tutti_request_free(request);
  // Broadcast of 300001 floats (slices of unequal size) from every rank in turn.
  for (int32_t root = 0; root < world_size; ++root) {
    Tensor t(TUTTI_DTYPE_FLOAT32, 300001, 4);
    for (int64_t i = 0; i < 300001; ++i) d.store(t.bytes.data(), i, Value(d, my_rank, i));
    const std::string name = "bcast." + std::to_string(root);
    Check("broadcast", tutti_broadcast(rt, name.c_str(), TUTTI_WORLD, &t.desc, root, &request));
    if (Finish(request, name) != TUTTI_OK) return false;
    tutti_request_free(request);
    for (int64_t i = 0; i < 300001; ++i)
      if (d.load(t.bytes.data(), i) != Value(d, root, i))
        return Say("fail %s[%lld]", name.c_str(), static_cast<long long>(i)), false;
  }
  return true;
}

// 1. One float32 sum of 1 MiB + 3 elements, then "traffic <peer> <sent> <received>" for every
//    peer: with the hierarchy a rank talks only to its host's ring neighbours and to the members
//    of its local index on the next and previous hosts.
// 2. "exact ok" after sums, minima and maxima of five dtypes at four sizes.
// 3. "fused ok" after eight 40000-element float32 tensors submitted together.
// 4. "others ok" after allgathers of uneven rows (one member none), alone and fused, a
//    reducescatter of rows that do not divide evenly, and a broadcast from every root, all
//    above the threshold and checked exactly.
// 5. "hash <dtype> <fnv>" of averages of pseudo-random data, float32, float64, float16, bfloat16.
int Hierarchical() {
  const DTypeInfo& f32 = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
  if (!CheckExact(f32, TUTTI_OP_SUM, (1 << 18) + 3, "first")) return 1;
  for (int32_t peer = 0; peer < world_size; ++peer) {
    if (peer == my_rank) continue;
    tutti_peer_stats_t stats = TUTTI_PEER_STATS_INIT;
    Check("peer stats", tutti_get_peer_stats(rt, TUTTI_WORLD, peer, &stats));
    Say("traffic %d %llu %llu", peer, static_cast<unsigned long long>(stats.bytes_sent),
        static_cast<unsigned long long>(stats.bytes_received));
  }

  // Below the 64 KiB threshold (flat), just above it, and large; all uneven across 2-8 ranks.
  const int64_t counts[] = {1001, 16411, 70001, 1000003};
  const int32_t dtypes[] = {TUTTI_DTYPE_FLOAT32, TUTTI_DTYPE_FLOAT64, TUTTI_DTYPE_INT32,
                            TUTTI_DTYPE_INT64, TUTTI_DTYPE_BFLOAT16};
  const int32_t ops[] = {TUTTI_OP_SUM, TUTTI_OP_MIN, TUTTI_OP_MAX};
  for (int32_t dtype : dtypes)
    for (int64_t count : counts)
      for (int32_t op : ops) {
        if (count > 100000 && op != TUTTI_OP_SUM) continue;  // keep the run short
        const DTypeInfo& d = AllDTypes()[dtype - 1];
        const std::string name = std::string("exact.") + d.name + "." + std::to_string(op) + "." +
                                 std::to_string(count);
        if (!CheckExact(d, op, count, name)) return 1;
      }
  Say("exact ok");

  // Submitted together, so that they fuse into one allreduce of 1.25 MB (above the threshold).
  std::vector<Tensor> parts;
  std::vector<tutti_request_t> requests;
  for (int k = 0; k < 8; ++k) {
    parts.emplace_back(TUTTI_DTYPE_FLOAT32, 40000, 4);
    for (int64_t i = 0; i < 40000; ++i) f32.store(parts.back().bytes.data(), i, Value(f32, my_rank, i + k));
  }
  for (int k = 0; k < 8; ++k) {
    tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
    tutti_request_t request = nullptr;
    const std::string name = "fused." + std::to_string(k);
    Check("fused", tutti_allreduce(rt, name.c_str(), TUTTI_WORLD, &parts[k].desc, &parts[k].desc,
                                   &options, &request));
    requests.push_back(request);
  }
  for (int k = 0; k < 8; ++k) {
    if (Finish(requests[k], "fused") != TUTTI_OK) return 1;
    tutti_request_free(requests[k]);
    for (int64_t i = 0; i < 40000; ++i)
      if (f32.load(parts[k].bytes.data(), i) != ExpectedOf(f32, TUTTI_OP_SUM, i + k))
        return Say("fail fused.%d[%lld]", k, static_cast<long long>(i)), 1;
  }
  Say("fused ok");
  if (!CheckOthers()) return 1;
  Say("others ok");

  for (int32_t dtype : {TUTTI_DTYPE_FLOAT32, TUTTI_DTYPE_FLOAT64, TUTTI_DTYPE_FLOAT16, TUTTI_DTYPE_BFLOAT16}) {
    const DTypeInfo& d = AllDTypes()[dtype - 1];
    Tensor t = RandomTensor(d, 300007, my_rank);
    const std::string name = std::string("random.") + d.name;
    Check(name.c_str(), Allreduce(name.c_str(), TUTTI_WORLD, t, TUTTI_OP_AVERAGE, 1.0, 1.5));
    Say("hash %s %016llx", d.name, static_cast<unsigned long long>(Fnv1a(t.bytes.data(), t.bytes.size())));
  }
  Say("hierarchical ok");
  return 0;
}

const ScenarioRegistrar registered = {
    {"hierarchical", Hierarchical},
};

}  // namespace
}  // namespace worker
