// Scenarios of the collective tests (tests/multiproc/collectives_test.cc) that check results:
// every collective on every dtype on a set, overlapping sets submitted in opposite orders,
// grouped allreduce and allgather, and results allocated by the application's allocator.
#include <tutti/tutti.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/collective_checks.h"
#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Broadcast, allgather, reducescatter (sum, average), alltoall and barrier on `set` for every
// dtype, with sizes 0, 1, and rows that do not divide by the set size. bool moves its bytes as
// they are, its reducescatter sum is "or" (0 or 1), and its average is refused at submission with
// the same status and message on every member. Prints "<op> ok" per op and "digest <fnv>" over
// every result this rank received.
int EveryCollective(int32_t set, bool large) {
  int32_t members[64], n = 0;
  Check("ranks", tutti_process_set_ranks(rt, set, members, 64, &n));
  int32_t me = -1;
  for (int32_t i = 0; i < n; ++i)
    if (members[i] == my_rank) me = i;
  uint64_t digest = 1469598103934665603ull;
  auto mix = [&](const std::vector<double>& values) {
    digest = (digest ^ Fnv1a(values.data(), values.size() * sizeof(double))) * 1099511628211ull;
  };
  int step = 0;
  auto name = [&](const char* op) { return std::string(op) + "." + std::to_string(step++); };

  for (const DTypeInfo& d : AllDTypes()) {
    // Broadcast from the last member, and from the first.
    for (int64_t count : {0, 1, 1001}) {
      for (int32_t root : {members[n - 1], members[0]}) {
        Tensor t = Filled(d, {count}, my_rank);
        tutti_request_t request;
        std::string what = name("broadcast");
        Check(what.c_str(), tutti_broadcast(rt, what.c_str(), set, &t.desc, root, &request));
        if (Finish(request, what) != TUTTI_OK) return 1;
        tutti_request_free(request);
        std::vector<double> got(count), want(count);
        for (int64_t i = 0; i < count; ++i) {
          got[i] = d.load(t.bytes.data(), i);
          want[i] = Value(d, root, i);
        }
        if (!Expect(what, got, want)) return 1;
        mix(got);
      }
    }
    // Allgather: the member at position p gives p (or p + 5) rows of 3.
    for (int64_t extra : {0, 5}) {
      Tensor t = Filled(d, {me + extra, 3}, my_rank);
      tutti_request_t request;
      std::string what = name("allgather");
      Check(what.c_str(), tutti_allgather(rt, what.c_str(), set, &t.desc, &request));
      if (Finish(request, what) != TUTTI_OK) return 1;
      std::vector<int64_t> shape;
      std::vector<double> got = Output(request, d, &shape), want;
      tutti_request_free(request);
      for (int32_t p = 0; p < n; ++p)
        for (int64_t i = 0; i < (p + extra) * 3; ++i) want.push_back(Value(d, members[p], i));
      if (shape != std::vector<int64_t>{static_cast<int64_t>(want.size() / 3), 3}) {
        Say("fail %s: wrong shape", what.c_str());
        return 1;
      }
      if (!Expect(what, got, want)) return 1;
      mix(got);
    }
    // Reducescatter of R rows of 2, sum and average.
    for (int32_t op : {TUTTI_OP_SUM, TUTTI_OP_AVERAGE}) {
      for (int64_t rows : {0, 1, 7}) {
        Tensor t = Filled(d, {rows, 2}, my_rank);
        tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
        options.reduce_op = op;
        tutti_request_t request;
        std::string what = name("reducescatter");
        const tutti_status_t submitted = tutti_reducescatter(rt, what.c_str(), set, &t.desc, &options, &request);
        if (d.dtype == TUTTI_DTYPE_BOOL && op == TUTTI_OP_AVERAGE) {
          const std::string refusal = "reducescatter '" + what +
                                      "': average is not defined for bool tensors; use sum "
                                      "(logical or) or min (logical and)";
          if (submitted != TUTTI_ERR_INVALID_ARGUMENT || tutti_last_error() != refusal)
            return Say("fail %s: %d %s", what.c_str(), submitted, tutti_last_error()), 1;
          continue;
        }
        Check(what.c_str(), submitted);
        if (Finish(request, what) != TUTTI_OK) return 1;
        std::vector<int64_t> shape;
        std::vector<double> got = Output(request, d, &shape), want;
        tutti_request_free(request);
        int64_t begin = 0;
        for (int32_t p = 0; p < me; ++p) begin += rows / n + (p < rows % n ? 1 : 0);
        const int64_t mine = rows / n + (me < rows % n ? 1 : 0);
        for (int64_t i = begin * 2; i < (begin + mine) * 2; ++i) {
          double sum = 0;
          for (int32_t p = 0; p < n; ++p) sum += Value(d, members[p], i);
          if (d.dtype == TUTTI_DTYPE_BOOL) sum = sum != 0 ? 1 : 0;  // "or": every byte is >= 0
          // Average: integers divide (truncating); floating types multiply by 1/n, in float32
          // for the 16- and 32-bit types, then round to the dtype.
          double v = sum;
          if (op == TUTTI_OP_AVERAGE) {
            if (d.dtype >= TUTTI_DTYPE_INT8) v = std::trunc(sum / n);
            else if (d.dtype == TUTTI_DTYPE_FLOAT64) v = sum * (1.0 / n);
            else v = static_cast<float>(sum) * static_cast<float>(1.0 / n);
          }
          want.push_back(v);
        }
        if (op == TUTTI_OP_AVERAGE && d.dtype <= TUTTI_DTYPE_BFLOAT16) {
          // Rounded to the dtype: compare through it.
          for (double& v : want) {
            Tensor one(d.dtype, 1, d.size);
            d.store(one.bytes.data(), 0, v);
            v = d.load(one.bytes.data(), 0);
          }
        }
        if (shape != std::vector<int64_t>{mine, 2}) {
          Say("fail %s: wrong shape", what.c_str());
          return 1;
        }
        if (!Expect(what, got, want)) return 1;
      }
    }
    // Alltoall: member p sends (p + q) % 3 rows of 2 to member q; and equal splits.
    for (bool equal : {false, true}) {
      std::vector<int64_t> splits(n);
      for (int32_t q = 0; q < n; ++q) splits[q] = equal ? 2 : (me + q) % 3;
      int64_t rows = 0;
      for (int64_t s : splits) rows += s;
      Tensor t = Filled(d, {rows, 2}, my_rank);
      tutti_request_t request;
      std::string what = name("alltoall");
      Check(what.c_str(), tutti_alltoall(rt, what.c_str(), set, &t.desc, equal ? nullptr : splits.data(),
                                         equal ? 0 : n, &request));
      if (Finish(request, what) != TUTTI_OK) return 1;
      std::vector<int64_t> shape, received(n);
      std::vector<double> got = Output(request, d, &shape), want;
      int32_t count = 0;
      Check("received splits", tutti_request_received_splits(request, received.data(), n, &count));
      tutti_request_free(request);
      for (int32_t p = 0; p < n; ++p) {
        // Rows member p sent to me start after those it sent to members before me.
        int64_t offset = 0;
        for (int32_t q = 0; q < me; ++q) offset += equal ? 2 : (p + q) % 3;
        const int64_t take = equal ? 2 : (p + me) % 3;
        if (received[p] != take) {
          Say("fail %s: received split %d is %lld", what.c_str(), p, static_cast<long long>(received[p]));
          return 1;
        }
        for (int64_t i = offset * 2; i < (offset + take) * 2; ++i) want.push_back(Value(d, members[p], i));
      }
      if (!Expect(what, got, want)) return 1;
    }
  }
  Say("collectives ok");
  tutti_request_t barrier;
  Check("barrier", tutti_barrier(rt, set, &barrier));
  if (Finish(barrier, "barrier") != TUTTI_OK) return 1;
  tutti_request_free(barrier);
  Say("barrier ok");
  if (large) {
    // 64 MiB cases, release builds only.
    const DTypeInfo& d = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
    Tensor t = Filled(d, {16 << 20}, my_rank);
    tutti_request_t request;
    Check("large broadcast", tutti_broadcast(rt, "large.broadcast", set, &t.desc, members[0], &request));
    if (Finish(request, "large broadcast") != TUTTI_OK) return 1;
    tutti_request_free(request);
    for (int64_t i = 0; i < (16 << 20); i += 4099)
      if (t.as<float>()[i] != static_cast<float>(Value(d, members[0], i))) return Say("fail large broadcast"), 1;
    // 64 MiB in total for each of the others, spot-checked.
    const int64_t rows_total = (16 << 20) / 4;  // rows of 4 floats
    Tensor rows = Filled(d, {rows_total, 4}, my_rank);
    Check("large reducescatter", tutti_reducescatter(rt, "large.rs", set, &rows.desc, nullptr, &request));
    if (Finish(request, "large reducescatter") != TUTTI_OK) return 1;
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    Check("output", tutti_request_output(request, &out));
    double sum = 0;
    for (int32_t p = 0; p < n; ++p) sum += Value(d, members[p], 4 * (rows_total / n) * me);
    if (me == 0 && static_cast<const float*>(out.data)[0] != static_cast<float>(sum))
      return Say("fail large reducescatter"), 1;
    tutti_request_free(request);
    Check("large allreduce", tutti_allreduce(rt, "large.ar", set, &rows.desc, &rows.desc, nullptr, &request));
    if (Finish(request, "large allreduce") != TUTTI_OK) return 1;
    tutti_request_free(request);
    for (int64_t i = 0; i < (16 << 20); i += 65537) {
      double want = 0;
      for (int32_t p = 0; p < n; ++p) want += Value(d, members[p], i);
      if (rows.as<float>()[i] != static_cast<float>(want)) return Say("fail large allreduce at %lld", static_cast<long long>(i)), 1;
    }
    Tensor part = Filled(d, {rows_total / n, 4}, my_rank);
    Check("large allgather", tutti_allgather(rt, "large.ag", set, &part.desc, &request));
    if (Finish(request, "large allgather") != TUTTI_OK) return 1;
    Check("output", tutti_request_output(request, &out));
    if (out.shape[0] != rows_total / n * n ||
        static_cast<const float*>(out.data)[(rows_total / n) * 4 * (n - 1) + 5] !=
            static_cast<float>(Value(d, members[n - 1], 5)))
      return Say("fail large allgather"), 1;
    tutti_request_free(request);
    Tensor shards = Filled(d, {rows_total / n * n, 4}, my_rank);
    Check("large alltoall", tutti_alltoall(rt, "large.a2a", set, &shards.desc, nullptr, 0, &request));
    if (Finish(request, "large alltoall") != TUTTI_OK) return 1;
    Check("output", tutti_request_output(request, &out));
    // Block p of the result is member p's block `me`.
    const int64_t block = (rows_total / n) * 4;
    if (static_cast<const float*>(out.data)[block * (n - 1) + 3] !=
        static_cast<float>(Value(d, members[n - 1], block * me + 3)))
      return Say("fail large alltoall"), 1;
    tutti_request_free(request);
    Say("large ok");
  }
  Say("digest %016llx", static_cast<unsigned long long>(digest));
  return 0;
}

// Runs EveryCollective on the set among `lists` ("0,1,2,3" or "0,1|2,3") this rank belongs to.
int CollectivesOn(const std::string& lists, bool large) {
  int32_t mine = -1;
  size_t start = 0;
  while (start <= lists.size()) {
    size_t end = lists.find('|', start);
    if (end == std::string::npos) end = lists.size();
    auto ranks = ParseRanks(lists.substr(start, end - start).c_str());
    int32_t id;
    Check("add", tutti_process_set_add(rt, ranks.data(), static_cast<int32_t>(ranks.size()), 0, &id));
    for (int32_t r : ranks)
      if (r == my_rank) mine = id;
    start = end + 1;
  }
  if (mine < 0) {
    Say("not a member");
    return 0;
  }
  return EveryCollective(mine, large);
}

// A={0,1,2} and B={1,2,3}: ranks 1 and 2 submit on both in opposite orders, 24 times, cycling
// through every collective on each set (a different one on A than on B). Allreduce and broadcast
// results are checked. Prints "interleave ok".
int Interleave() {
  int32_t a_ranks[] = {0, 1, 2}, b_ranks[] = {1, 2, 3}, a, b;
  Check("add A", tutti_process_set_add(rt, a_ranks, 3, 0, &a));
  Check("add B", tutti_process_set_add(rt, b_ranks, 3, 0, &b));
  const DTypeInfo& f32 = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
  // Submits collective `kind` (0..5) on `set` whose lowest member is `low`; checks what it can.
  struct Op {
    Tensor t{TUTTI_DTYPE_FLOAT32, 0, 4};
    tutti_request_t request = nullptr;
    int kind = 0, low = 0;
  };
  auto submit = [&](Op& op, int kind, int32_t set, int32_t low, const std::string& name) {
    op.kind = kind;
    op.low = low;
    op.t = Filled(f32, {6, 2}, my_rank);
    switch (kind) {
      case 0: Check("allreduce", tutti_allreduce(rt, name.c_str(), set, &op.t.desc, &op.t.desc, nullptr, &op.request)); break;
      case 1: Check("broadcast", tutti_broadcast(rt, name.c_str(), set, &op.t.desc, low, &op.request)); break;
      case 2: Check("allgather", tutti_allgather(rt, name.c_str(), set, &op.t.desc, &op.request)); break;
      case 3: Check("reducescatter", tutti_reducescatter(rt, name.c_str(), set, &op.t.desc, nullptr, &op.request)); break;
      case 4: Check("alltoall", tutti_alltoall(rt, name.c_str(), set, &op.t.desc, nullptr, 0, &op.request)); break;
      default: Check("barrier", tutti_barrier(rt, set, &op.request)); break;
    }
  };
  auto finish = [&](Op& op) {
    if (!op.request) return true;
    if (Finish(op.request, "interleaved") != TUTTI_OK) return false;
    tutti_request_free(op.request);
    const float first = op.t.as<float>()[11];
    if (op.kind == 0) {
      double sum = 0;
      for (int32_t r = op.low; r < op.low + 3; ++r) sum += Value(f32, r, 11);
      if (first != static_cast<float>(sum)) return Say("fail: interleaved allreduce"), false;
    }
    if (op.kind == 1 && first != static_cast<float>(Value(f32, op.low, 11)))
      return Say("fail: interleaved broadcast"), false;
    return true;
  };
  for (int i = 0; i < 24; ++i) {
    Op on_a, on_b;
    const std::string n = std::to_string(i);
    const bool in_a = my_rank <= 2, in_b = my_rank >= 1;
    if (my_rank == 2) {  // B first, then A; rank 1 does the opposite
      submit(on_b, (i + 3) % 6, b, 1, "b." + n);
      submit(on_a, i % 6, a, 0, "a." + n);
    } else {
      if (in_a) submit(on_a, i % 6, a, 0, "a." + n);
      if (in_b) submit(on_b, (i + 3) % 6, b, 1, "b." + n);
    }
    if (!finish(on_a) || !finish(on_b)) return 1;
  }
  Say("interleave ok");
  return 0;
}

// Grouped allreduce (three tensors of different dtypes and sizes) and grouped allgather (two
// tensors, variable rows) on the world; then a group where rank 2's second tensor has another
// shape: every tensor of it fails with one message ("group <status> <message>"); then a good one.
int Grouped() {
  const DTypeInfo& f32 = AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1];
  const DTypeInfo& i64 = AllDTypes()[TUTTI_DTYPE_INT64 - 1];
  const DTypeInfo& f16 = AllDTypes()[TUTTI_DTYPE_FLOAT16 - 1];
  std::vector<Tensor> tensors;
  tensors.push_back(Filled(f32, {1000}, my_rank));
  tensors.push_back(Filled(i64, {3, 3}, my_rank));
  tensors.push_back(Filled(f16, {1}, my_rank));
  tutti_tensor_t descs[3] = {tensors[0].desc, tensors[1].desc, tensors[2].desc};
  tutti_request_t request;
  Check("grouped allreduce", tutti_grouped_allreduce(rt, "layers", TUTTI_WORLD, 3, descs, descs, nullptr, &request));
  if (Finish(request, "grouped allreduce") != TUTTI_OK) return 1;
  tutti_request_free(request);
  const DTypeInfo* types[] = {&f32, &i64, &f16};
  for (int k = 0; k < 3; ++k) {
    int64_t count = static_cast<int64_t>(tensors[k].bytes.size() / types[k]->size);
    for (int64_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int32_t r = 0; r < world_size; ++r) sum += Value(*types[k], r, i);
      if (types[k]->load(tensors[k].bytes.data(), i) != sum) return Say("fail: grouped sum %d", k), 1;
    }
  }
  Say("grouped allreduce ok");

  Tensor a = Filled(f32, {my_rank + 1, 2}, my_rank), b = Filled(i64, {1}, my_rank);
  tutti_tensor_t gather[2] = {a.desc, b.desc};
  Check("grouped allgather", tutti_grouped_allgather(rt, nullptr, TUTTI_WORLD, 2, gather, &request));
  if (Finish(request, "grouped allgather") != TUTTI_OK) return 1;
  tutti_tensor_t first = TUTTI_TENSOR_INIT;
  Check("output_at", tutti_request_output_at(request, 0, &first));
  int64_t rows = 0;
  for (int32_t r = 0; r < world_size; ++r) {
    for (int64_t i = 0; i < (r + 1) * 2; ++i)
      if (static_cast<const float*>(first.data)[rows * 2 + i] != static_cast<float>(Value(f32, r, i)))
        return Say("fail: grouped allgather first tensor"), 1;
    rows += r + 1;
  }
  if (first.shape[0] != rows) return Say("fail: grouped allgather rows"), 1;
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  Check("output_at", tutti_request_output_at(request, 1, &out));
  if (out.shape[0] != world_size || reinterpret_cast<int64_t*>(out.data)[world_size - 1] != static_cast<int64_t>(Value(i64, world_size - 1, 0)))
    return Say("fail: grouped allgather second tensor"), 1;
  tutti_request_free(request);
  Say("grouped allgather ok");

  Tensor c = Filled(f32, {4}, my_rank), d = Filled(f32, {my_rank == 2 ? 5 : 4}, my_rank);
  tutti_tensor_t bad[2] = {c.desc, d.desc};
  Check("bad group", tutti_grouped_allreduce(rt, "bad", TUTTI_WORLD, 2, bad, bad, nullptr, &request));
  tutti_status_t status = tutti_request_wait(request, -1);
  Say("group %d %s", status, tutti_last_error());
  tutti_request_free(request);
  Check("good group", tutti_grouped_allreduce(rt, "bad", TUTTI_WORLD, 1, bad, bad, nullptr, &request));
  if (Finish(request, "good group") != TUTTI_OK) return 1;
  tutti_request_free(request);
  Say("grouped done");
  return 0;
}

// With TEST_ALLOCATOR=1: an allgather's result comes from the application's allocator and goes
// back to it when the request is freed. Prints "allocator <allocations> <deallocations>" after
// the wait and after the free.
int AllocatorUse() {
  Tensor t = Filled(AllDTypes()[TUTTI_DTYPE_FLOAT32 - 1], {2, 3}, my_rank);
  tutti_request_t request;
  Check("allgather", tutti_allgather(rt, "g", TUTTI_WORLD, &t.desc, &request));
  if (Finish(request, "allgather") != TUTTI_OK) return 1;
  Say("allocator %d %d", allocations.load(), deallocations.load());
  tutti_request_free(request);
  Say("allocator %d %d", allocations.load(), deallocations.load());
  return 0;
}

const ScenarioRegistrar registered = {
    {"collectives",
     [](const ScenarioArgs& args) {
       return CollectivesOn(args.size() > 0 ? args[0] : "", args.size() > 1 && args[1] == "large");
     }},
    {"interleave", Interleave},
    {"grouped", Grouped},
    {"allocator", AllocatorUse},
};

}  // namespace
}  // namespace worker
