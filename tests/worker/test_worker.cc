// A rank for the multi-process tests. Uses tutti.h alone, like any application. The scenario is
// argv[1]; the harness reads this program's output lines and, where a scenario must wait for the
// harness, writes lines to its stdin. Every line is flushed at once.
//
// Output lines: "ready", "fail <what>: <status> <message>", and scenario-specific lines documented
// with each scenario. Exit status 0 means the scenario's own checks passed.
#include <tutti/tutti.h>

#include "worker/fusion_scenarios.h"
#include "worker/transport_scenarios.h"
#include "worker/worker_common.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace worker;

// ---- scenarios ---------------------------------------------------------------------------------

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

// Static sets (TEST_STATIC_SETS="0,1;2,3") or added ones: each pair allreduces 20 times on its own
// set while every rank also allreduces on the world. Prints "sets ok".
int DisjointSets(bool added) {
  int32_t mine = -1;
  if (added) {
    int32_t low[] = {0, 1}, high[] = {2, 3}, id_low, id_high;
    Check("add low", tutti_process_set_add(rt, low, 2, 0, &id_low));
    Check("add high", tutti_process_set_add(rt, high, 2, 0, &id_high));
    mine = my_rank < 2 ? id_low : id_high;
  } else {
    mine = my_rank < 2 ? 1 : 2;
  }
  Say("set %d", mine);
  for (int i = 0; i < 20; ++i) {
    std::string set_name = "pair." + std::to_string(i), world_name = "world." + std::to_string(i);
    Tensor a(TUTTI_DTYPE_INT32, 5000, 4), b(TUTTI_DTYPE_INT32, 300, 4);
    for (int j = 0; j < 5000; ++j) a.as<int32_t>()[j] = my_rank * 1000 + j;
    for (int j = 0; j < 300; ++j) b.as<int32_t>()[j] = my_rank + i;
    tutti_request_t ra, rb;
    Check("submit pair", tutti_allreduce(rt, set_name.c_str(), mine, &a.desc, &a.desc, nullptr, &ra));
    Check("submit world", tutti_allreduce(rt, world_name.c_str(), TUTTI_WORLD, &b.desc, &b.desc, nullptr, &rb));
    Check("wait world", tutti_request_wait(rb, -1));
    Check("wait pair", tutti_request_wait(ra, -1));
    tutti_request_free(ra);
    tutti_request_free(rb);
    const int32_t base = my_rank < 2 ? 1 : 5;  // 0+1 or 2+3
    for (int j = 0; j < 5000; ++j)
      if (a.as<int32_t>()[j] != base * 1000 + 2 * j) return Say("fail pair %d", j), 1;
    for (int j = 0; j < 300; ++j)
      if (b.as<int32_t>()[j] != 6 + 4 * i) return Say("fail world %d", j), 1;
  }
  Say("sets ok");
  return 0;
}

// A={0,1,2}, B={1,2,3}. Rank 0 submits on A only after the harness says "go", which it does once
// ranks 1-3 printed "B 99" (their 100th B allreduce completed while their A request was pending).
int Independence() {
  int32_t a_ranks[] = {0, 1, 2}, b_ranks[] = {1, 2, 3}, a, b;
  Check("add A", tutti_process_set_add(rt, a_ranks, 3, 0, &a));
  Check("add B", tutti_process_set_add(rt, b_ranks, 3, 0, &b));
  Say("ready");
  Tensor ta(TUTTI_DTYPE_FLOAT32, 64, 4);
  for (int i = 0; i < 64; ++i) ta.as<float>()[i] = static_cast<float>(my_rank);
  tutti_request_t on_a = nullptr;
  if (my_rank == 0) AwaitGo();
  if (my_rank <= 2) Check("submit A", tutti_allreduce(rt, "a", a, &ta.desc, &ta.desc, nullptr, &on_a));
  if (my_rank >= 1) {
    for (int i = 0; i < 100; ++i) {
      SumOnSet(("b." + std::to_string(i)).c_str(), b, 16);
      Say("B %d", i);
      if (my_rank <= 2 && i == 99 && tutti_request_test(on_a) != TUTTI_IN_PROGRESS)
        return Say("fail: A completed before rank 0 submitted it"), 1;
    }
  }
  if (on_a) {
    Check("wait A", tutti_request_wait(on_a, -1));
    tutti_request_free(on_a);
    if (ta.as<float>()[0] != 3.0f) return Say("fail: A sum %f", ta.as<float>()[0]), 1;
    Say("A ok");
  }
  return 0;
}

// Ranks 0 and 1 add {0,1} and allreduce on it while 2 and 3 are stopped by the harness; then 2 and
// 3 add {0,1} as non-members and must get the same id. Prints "added <id>", "pair ok", "done".
int MembersOnlyAdd() {
  Say("ready");
  AwaitGo();
  int32_t pair[] = {0, 1}, id = -1;
  Check("add pair", tutti_process_set_add(rt, pair, 2, 0, &id));
  Say("added %d", id);
  if (my_rank < 2) {
    SumOnSet("pair", id);
    Say("pair ok");
    AwaitGo();
  }
  SumOnSet("final", TUTTI_WORLD);
  Say("done");
  return 0;
}

// S={0,2}: members allreduce, rank 0 leaves "orphan" pending, everyone removes S; then S's
// requests fail on members, and adding {0,2} again gives a new id. Prints "removed <id>",
// "orphan <status> <message>", "after <status> <message>", "readded <id>".
int Remove() {
  int32_t s_ranks[] = {0, 2}, s = -1;
  Check("add S", tutti_process_set_add(rt, s_ranks, 2, 0, &s));
  const bool member = my_rank == 0 || my_rank == 2;
  tutti_request_t orphan = nullptr;
  Tensor t(TUTTI_DTYPE_FLOAT32, 8, 4);
  if (member) {
    SumOnSet("on-s", s);
    if (my_rank == 0) Check("orphan", tutti_allreduce(rt, "orphan", s, &t.desc, &t.desc, nullptr, &orphan));
  } else {
    tutti_request_t request = nullptr;
    tutti_status_t status = tutti_allreduce(rt, "x", s, &t.desc, &t.desc, nullptr, &request);
    Say("nonmember %d %s", status, tutti_last_error());
  }
  // A non-member's remove races with the members': once they removed the set, it is gone here
  // too and the call says so.
  tutti_status_t removal = tutti_process_set_remove(rt, s, 0);
  if (!(removal == TUTTI_ERR_UNKNOWN_SET && !member)) Check("remove S", removal);
  Say("removed %d", s);
  if (orphan) {
    tutti_status_t status = tutti_request_wait(orphan, -1);
    Say("orphan %d %s", status, tutti_last_error());
    tutti_request_free(orphan);
  }
  tutti_request_t request = nullptr;
  tutti_status_t status = tutti_allreduce(rt, "after", s, &t.desc, &t.desc, nullptr, &request);
  Say("after %d %s", status, tutti_last_error());
  status = tutti_process_set_remove(rt, s, 0);
  Say("remove again %d %s", status, tutti_last_error());
  SumOnSet("sync", TUTTI_WORLD);  // members finished removing before anyone re-adds
  int32_t again = -1;
  Check("re-add S", tutti_process_set_add(rt, s_ranks, 2, 0, &again));
  Say("readded %d", again);
  if (member) SumOnSet("on-new-s", again);
  SumOnSet("final", TUTTI_WORLD);
  return 0;
}

// Prints "world <rank> <size> <local_rank> <local_size> <cross_rank> <cross_size>", then allreduces.
int Basic() {
  int32_t values[4];
  Check("local_rank", tutti_local_rank(rt, &values[0]));
  Check("local_size", tutti_local_size(rt, &values[1]));
  Check("cross_rank", tutti_cross_rank(rt, &values[2]));
  Check("cross_size", tutti_cross_size(rt, &values[3]));
  Say("world %d %d %d %d %d %d", my_rank, world_size, values[0], values[1], values[2], values[3]);
  for (int i = 0; i < 10; ++i) SumOnSet(("basic." + std::to_string(i)).c_str(), TUTTI_WORLD, 10000);
  Say("basic ok");
  return 0;
}

// ---- every collective (tests/multiproc/collectives_test.cc) --------------------------------------

// Waits for `request` and returns its status; `what` names it in failure lines.
tutti_status_t Finish(tutti_request_t request, const std::string& what) {
  tutti_status_t status = tutti_request_wait(request, -1);
  if (status != TUTTI_OK) Say("fail %s: %d %s", what.c_str(), status, tutti_last_error());
  return status;
}

// The result tensor a request owns, as values of `d`.
std::vector<double> Output(tutti_request_t request, const DTypeInfo& d, std::vector<int64_t>* shape) {
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  Check("output", tutti_request_output(request, &out));
  shape->assign(out.shape, out.shape + out.ndim);
  int64_t count = 1;
  for (int64_t dim : *shape) count *= dim;
  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) values[i] = d.load(out.data, i);
  return values;
}

// A value every dtype holds exactly: small integers, some negative (none for uint8).
double Value(const DTypeInfo& d, int32_t rank, int64_t i) {
  double v = static_cast<double>((rank * 5 + i * 3) % 9) - (d.dtype == TUTTI_DTYPE_UINT8 ? 0 : 4);
  return v;
}

Tensor Filled(const DTypeInfo& d, std::vector<int64_t> shape, int32_t rank) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  Tensor t(d.dtype, count, d.size);
  t.shape = shape;
  t.desc.ndim = static_cast<int32_t>(shape.size());
  t.desc.shape = t.shape.data();
  for (int64_t i = 0; i < count; ++i) d.store(t.bytes.data(), i, Value(d, rank, i));
  return t;
}

bool Expect(const std::string& what, const std::vector<double>& got, const std::vector<double>& want) {
  if (got == want) return true;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  Say("fail %s: %zu values, expected %zu; first difference at %zu", what.c_str(), got.size(),
      want.size(), i);
  return false;
}

// Broadcast, allgather, reducescatter (sum, average), alltoall and barrier on `set` for every
// dtype, with sizes 0, 1, and rows that do not divide by the set size. Prints "<op> ok" per op
// and "digest <fnv>" over every result this rank received.
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
        Check(what.c_str(), tutti_reducescatter(rt, what.c_str(), set, &t.desc, &options, &request));
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

// Waits for a request expected to fail and prints "err <label> <status> <message>".
// `request` is read after `submitted` was computed (argument order is unspecified in C++).
void ReportFailure(const char* label, tutti_status_t submitted, tutti_request_t* slot) {
  tutti_request_t request = *slot;
  *slot = nullptr;
  if (submitted != TUTTI_OK) {
    Say("err %s %d %s", label, submitted, tutti_last_error());
    return;
  }
  tutti_status_t status = tutti_request_wait(request, -1);
  Say("err %s %d %s", label, status, tutti_last_error());
  tutti_request_free(request);
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

// Two pipeline stages, F={0,1} and B={2,3}, each allreducing on its own set, while rank 1 sends
// activations to rank 2 and rank 2 sends gradients back (world set, tags cycling), with one pair
// of messages received in the opposite order of sending. Prints "pipeline ok".
int Pipeline() {
  int32_t f_ranks[] = {0, 1}, b_ranks[] = {2, 3}, f, b;
  Check("add F", tutti_process_set_add(rt, f_ranks, 2, 0, &f));
  Check("add B", tutti_process_set_add(rt, b_ranks, 2, 0, &b));
  const int32_t stage = my_rank < 2 ? f : b;
  // A world allreduce that ranks 0 and 3 submit only at the end: the world set's point-to-point
  // traffic below must not wait behind it.
  Tensor held(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t held_request = nullptr;
  if (my_rank == 1 || my_rank == 2)
    Check("held", tutti_allreduce(rt, "held", TUTTI_WORLD, &held.desc, &held.desc, nullptr, &held_request));
  for (int i = 0; i < 20; ++i) {
    Tensor grad(TUTTI_DTYPE_FLOAT32, 1000, 4), act(TUTTI_DTYPE_FLOAT32, 64, 4), back(TUTTI_DTYPE_FLOAT32, 8, 4);
    for (int k = 0; k < 1000; ++k) grad.as<float>()[k] = static_cast<float>(my_rank);
    tutti_request_t reduce, p2p = nullptr, p2p_back = nullptr;
    Check("allreduce", tutti_allreduce(rt, ("grad." + std::to_string(i)).c_str(), stage, &grad.desc,
                                       &grad.desc, nullptr, &reduce));
    if (my_rank == 1) {
      for (int k = 0; k < 64; ++k) act.as<float>()[k] = static_cast<float>(i * 100 + k);
      Check("send", tutti_send(rt, TUTTI_WORLD, &act.desc, 2, i % 3, &p2p));
      Check("recv", tutti_recv(rt, TUTTI_WORLD, &back.desc, 2, 100, &p2p_back));
    } else if (my_rank == 2) {
      Check("recv", tutti_recv(rt, TUTTI_WORLD, &act.desc, 1, i % 3, &p2p));
      for (int k = 0; k < 8; ++k) back.as<float>()[k] = static_cast<float>(-i);
      Check("send", tutti_send(rt, TUTTI_WORLD, &back.desc, 1, 100, &p2p_back));
    }
    if (Finish(reduce, "allreduce") != TUTTI_OK) return 1;
    tutti_request_free(reduce);
    const float expected_sum = my_rank < 2 ? 1.0f : 5.0f;
    if (grad.as<float>()[999] != expected_sum) return Say("fail: stage sum %f", grad.as<float>()[999]), 1;
    for (tutti_request_t r : {p2p, p2p_back}) {
      if (!r) continue;
      if (Finish(r, "p2p") != TUTTI_OK) return 1;
      tutti_request_free(r);
    }
    if (my_rank == 2 && act.as<float>()[63] != static_cast<float>(i * 100 + 63)) return Say("fail: activation"), 1;
    if (my_rank == 1 && back.as<float>()[7] != static_cast<float>(-i)) return Say("fail: gradient"), 1;
  }
  if (my_rank == 1 || my_rank == 2) {
    // Tags 5 then 6 sent; received as 6 then 5.
    Tensor five(TUTTI_DTYPE_INT32, 3, 4), six(TUTTI_DTYPE_INT32, 3, 4);
    tutti_request_t r5, r6;
    if (my_rank == 1) {
      five.as<int32_t>()[0] = 5;
      six.as<int32_t>()[0] = 6;
      Check("send 5", tutti_send(rt, TUTTI_WORLD, &five.desc, 2, 5, &r5));
      Check("send 6", tutti_send(rt, TUTTI_WORLD, &six.desc, 2, 6, &r6));
    } else {
      Check("recv 6", tutti_recv(rt, TUTTI_WORLD, &six.desc, 1, 6, &r6));
      Check("recv 5", tutti_recv(rt, TUTTI_WORLD, &five.desc, 1, 5, &r5));
    }
    if (Finish(r5, "tag 5") != TUTTI_OK || Finish(r6, "tag 6") != TUTTI_OK) return 1;
    tutti_request_free(r5);
    tutti_request_free(r6);
    if (five.as<int32_t>()[0] != 5 || six.as<int32_t>()[0] != 6) return Say("fail: tags crossed"), 1;
  }
  if (held_request && tutti_request_test(held_request) != TUTTI_IN_PROGRESS)
    return Say("fail: 'held' completed before ranks 0 and 3 submitted it"), 1;
  if (my_rank == 0 || my_rank == 3)
    Check("held", tutti_allreduce(rt, "held", TUTTI_WORLD, &held.desc, &held.desc, nullptr, &held_request));
  if (Finish(held_request, "held") != TUTTI_OK) return 1;
  tutti_request_free(held_request);
  Say("pipeline ok");
  return 0;
}

// Point-to-point argument errors and a size mismatch, then a recv from a rank the harness kills:
// prints "err <label> <status> <message>", "posted", then "recv <status> <message>". World of 3;
// rank 1 is the one killed, rank 2 only takes part in the world.
int PointToPointErrors() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 2, 4), big(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t request = nullptr;
  int32_t pair[] = {0, 1}, p;
  Check("add", tutti_process_set_add(rt, pair, 2, 0, &p));
  if (my_rank == 0) {
    ReportFailure("non-member", tutti_send(rt, p, &t.desc, 2, 0, &request), &request);
    ReportFailure("self", tutti_recv(rt, TUTTI_WORLD, &t.desc, 0, 0, &request), &request);
    ReportFailure("tag", tutti_send(rt, TUTTI_WORLD, &t.desc, 1, -3, &request), &request);
    ReportFailure("size", tutti_recv(rt, TUTTI_WORLD, &t.desc, 1, 7, &request), &request);
    Check("recv", tutti_recv(rt, TUTTI_WORLD, &t.desc, 1, 8, &request));
    Say("posted");
    tutti_status_t status = tutti_request_wait(request, 60000);
    Say("recv %d %s", status, tutti_last_error());
    tutti_request_free(request);
  } else if (my_rank == 1) {
    Check("send", tutti_send(rt, TUTTI_WORLD, &big.desc, 0, 7, &request));
    if (Finish(request, "send") != TUTTI_OK) return 1;
    tutti_request_free(request);
    AwaitGo();  // killed meanwhile
  }
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

// ---- failure scenarios (tests/multiproc/failure_test.cc) ----------------------------------------

// Set while the harness has not yet written "go": loops run until then.
std::atomic<bool> go_seen{false};
void WatchForGo() {
  std::thread([] {
    AwaitGo();
    go_seen = true;
  }).detach();
}

// Allreduces on `set` until "go"; prints "<label> <i>" after each success, or
// "<label> failed <status> <message>" once and returns.
void LoopUntilGo(const char* label, int32_t set) {
  for (int i = 0; !go_seen; ++i) {
    Tensor t(TUTTI_DTYPE_FLOAT32, 256, 4);
    std::string name = std::string(label) + "." + std::to_string(i);
    if (Allreduce(name.c_str(), set, t) != TUTTI_OK) {
      Say("%s failed %s", label, last_failure.c_str());
      while (!go_seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    Say("%s %d", label, i);
  }
}

// World of 5: S={0,1,2} loops 64 MiB allreduces ("big started <i>" when submitted, "big ok <i>",
// or "big failed <status> <message>" then "after <status> <message>" for one more submission);
// D={3,4} loops small ones ("d <i>"). Everyone stops at "go".
int BigWithBystanders() {
  int32_t s_ranks[] = {0, 1, 2}, d_ranks[] = {3, 4}, s, d;
  Check("add S", tutti_process_set_add(rt, s_ranks, 3, 0, &s));
  Check("add D", tutti_process_set_add(rt, d_ranks, 2, 0, &d));
  WatchForGo();
  if (my_rank >= 3) {
    LoopUntilGo("d", d);
    return 0;
  }
  const int64_t count = 16 << 20;  // 64 MiB of float32
  Tensor big(TUTTI_DTYPE_FLOAT32, count, 4);
  for (int i = 0; !go_seen; ++i) {
    std::string name = "big." + std::to_string(i);
    tutti_request_t request;
    Check("submit big", tutti_allreduce(rt, name.c_str(), s, &big.desc, &big.desc, nullptr, &request));
    Say("big started %d", i);
    tutti_status_t status = tutti_request_wait(request, 120000);
    std::string error = tutti_last_error();
    tutti_request_free(request);
    if (status == TUTTI_OK) {
      Say("big ok %d", i);
      continue;
    }
    Say("big failed %d %s", status, error.c_str());
    status = tutti_allreduce(rt, "after", s, &big.desc, &big.desc, nullptr, &request);
    Say("after %d %s", status, tutti_last_error());
    break;
  }
  while (!go_seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

// Every rank submits a request nobody matches ("submitted"), then the harness kills or restarts
// tuttid: prints "lost <status> <message>" for the pending request, then "after ..." for a new
// submission and "add ..." for a set change.
int CoordinatorLoss() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t request;
  std::string name = "only." + std::to_string(my_rank);
  Check("submit", tutti_allreduce(rt, name.c_str(), TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request));
  Say("submitted");
  tutti_status_t status = tutti_request_wait(request, 60000);
  Say("lost %d %s", status, tutti_last_error());
  tutti_request_free(request);
  status = tutti_allreduce(rt, "after", TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request);
  Say("after %d %s", status, tutti_last_error());
  int32_t pair[] = {0, 1}, id;
  status = tutti_process_set_add(rt, pair, 2, 1000, &id);
  Say("add %d %s", status, tutti_last_error());
  return 0;
}

// World of 3. Rank 1 forks a child that tries the runtime ("child <status> <message>") and then
// lives until rank 1 dies; rank 1 prints "forked" and idles. Ranks 0 and 2 allreduce on the world
// and print "status ..." when rank 1, killed by the harness, is declared lost.
int ForkThenDie() {
  if (my_rank == 1) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
      close(pipe_fds[1]);
      int32_t value;
      tutti_status_t status = tutti_rank(rt, &value);
      Say("child %d %s", status, tutti_last_error());
      status = tutti_finalize(rt);
      Say("child finalize %d", status);
      char byte;
      while (read(pipe_fds[0], &byte, 1) > 0) {
      }
      _exit(0);  // the parent died: its end of the pipe closed
    }
    close(pipe_fds[0]);
    Say("forked");
    AwaitGo();  // the harness kills this process meanwhile
    return 0;
  }
  Tensor t(TUTTI_DTYPE_FLOAT32, 4, 4);
  if (Allreduce("after-fork", TUTTI_WORLD, t) == TUTTI_OK) return Say("fail: rank 1 was expected to die"), 1;
  return 0;
}

// Two ranks start a 64 MiB allreduce ("started"); the harness freezes rank 1 and tells rank 0 to
// finalize with the request in flight: prints "finalized <status> <ms>" and "request <status>
// <message>". Rank 1 never gets further.
int FinalizeInFlight() {
  Tensor big(TUTTI_DTYPE_FLOAT32, 16 << 20, 4);
  tutti_request_t request;
  Check("submit", tutti_allreduce(rt, "big", TUTTI_WORLD, &big.desc, &big.desc, nullptr, &request));
  Say("started");
  AwaitGo();
  auto start = std::chrono::steady_clock::now();
  tutti_status_t status = tutti_finalize(rt);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  rt = nullptr;
  Say("finalized %d %lld", status, static_cast<long long>(ms.count()));
  status = tutti_request_wait(request, 0);
  Say("request %d %s", status, tutti_last_error());
  tutti_request_free(request);
  std::exit(0);  // the runtime is gone: skip main's finalize
}

// Three ranks start a 64 MiB allreduce ("started"); the harness freezes rank 2 and tells rank 0 to
// abort: rank 0 prints "aborted <status> <ms> <message>" (how long its request took to end after
// the call) and "finalized <status>"; rank 1 prints "peer <status> <message>".
int AbortInFlight() {
  Tensor big(TUTTI_DTYPE_FLOAT32, 16 << 20, 4);
  tutti_request_t request;
  Check("submit", tutti_allreduce(rt, "big", TUTTI_WORLD, &big.desc, &big.desc, nullptr, &request));
  Say("started");
  if (my_rank == 0) {
    AwaitGo();
    auto start = std::chrono::steady_clock::now();
    Check("abort", tutti_abort(rt));
    tutti_status_t status = tutti_request_wait(request, -1);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    Say("aborted %d %lld %s", status, static_cast<long long>(ms.count()), tutti_last_error());
    tutti_request_free(request);
    tutti_request_t later;
    status = tutti_barrier(rt, TUTTI_WORLD, &later);
    Say("later %d %s", status, tutti_last_error());
    // Held until rank 1 reported: once this rank exits, its closed connections race the
    // coordinator's word of the abort to rank 1.
    AwaitGo();
    Say("finalized %d", tutti_finalize(rt));
    std::exit(0);
  }
  tutti_status_t status = tutti_request_wait(request, -1);
  Say("peer %d %s", status, tutti_last_error());
  tutti_request_free(request);
  return 0;
}

// Every rank loops world allreduces until "go" ("w <i>"), while the harness throws bad frames.
int Steady() {
  WatchForGo();
  LoopUntilGo("w", TUTTI_WORLD);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  if (scenario == "init_error") {
    // Expects init to fail; prints "init <status> <message>".
    tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
    tutti_status_t status = tutti_init(&options, &rt);
    Say("init %d %s", status, tutti_last_error());
    if (status == TUTTI_OK) tutti_finalize(rt);
    return 0;
  }
  Init();
  int result = 2;
  if (scenario == "matrix") result = DTypeMatrix();
  else if (scenario == "static_sets") result = DisjointSets(false);
  else if (scenario == "added_sets") result = DisjointSets(true);
  else if (scenario == "independence") result = Independence();
  else if (scenario == "members_only_add") result = MembersOnlyAdd();
  else if (scenario == "remove") result = Remove();
  else if (scenario == "basic") result = Basic();
  else if (scenario == "transport") result = TransportCases();
  else if (scenario == "shm_loop") result = ShmLoop();
  else if (scenario == "big") result = BigWithBystanders();
  else if (scenario == "coordinator_loss") result = CoordinatorLoss();
  else if (scenario == "fork") result = ForkThenDie();
  else if (scenario == "steady") result = Steady();
  else if (scenario == "finalize_in_flight") result = FinalizeInFlight();
  else if (scenario == "abort") result = AbortInFlight();
  else if (scenario == "pipeline") result = Pipeline();
  else if (scenario == "grouped") result = Grouped();
  else if (scenario == "join") result = JoinUneven();
  else if (scenario == "allocator") result = AllocatorUse();
  else if (scenario == "p2p_errors") result = PointToPointErrors();
  else if (scenario == "interleave") result = Interleave();
  else if (scenario == "fusion_mix") result = FusionMix();
  else if (scenario == "training_steps")
    result = TrainingSteps(argc > 2 ? std::atoi(argv[2]) : 3, argc > 3 ? std::atoi(argv[3]) : 200);
  else if (scenario == "cache_invalidation") result = CacheInvalidation();
  else if (scenario == "priorities") result = Priorities();
  else if (scenario == "stall") result = Stall();
  else if (scenario == "collectives")
    result = CollectivesOn(argc > 2 ? argv[2] : "", argc > 3 && std::string(argv[3]) == "large");
  else Say("fail: unknown scenario %s", scenario.c_str());
  Check("finalize", tutti_finalize(rt));
  return result;
}
