// Scenarios of the fusion, response-cache, priority and stall tests (tests/multiproc/fusion_test.cc).
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

tutti_counters_t Counters() {
  tutti_counters_t c = TUTTI_COUNTERS_INIT;
  Check("counters", tutti_get_counters(rt, &c));
  return c;
}

// A tensor of any shape whose element i on rank r is Contribution(r, i, op) (bool:
// BoolContribution(r, i)).
struct Filled {
  std::vector<char> bytes;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
  const DTypeInfo* type;

  Filled(int32_t dtype, std::vector<int64_t> dims, int32_t op) : shape(std::move(dims)) {
    for (const auto& t : AllDTypes())
      if (t.dtype == dtype) type = &t;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    bytes.resize(count * type->size);
    for (int64_t i = 0; i < count; ++i)
      type->store(bytes.data(), i,
                  dtype == TUTTI_DTYPE_BOOL ? BoolContribution(my_rank, i) : Contribution(my_rank, i, op));
    desc.data = bytes.data();
    desc.dtype = dtype;
    desc.ndim = static_cast<int32_t>(shape.size());
    desc.shape = shape.data();
  }
  int64_t count() const { return static_cast<int64_t>(bytes.size() / type->size); }
};

void Wait(const char* what, tutti_request_t request) {
  tutti_status_t status = tutti_request_wait(request, -1);
  if (status != TUTTI_OK) Die(what, status);
}

// Allreduces of mixed dtypes, ops and scale factors, one larger than the 16 KiB threshold the
// test sets, a grouped allreduce, two allgathers and two reducescatters, all submitted before any
// is waited on. Checks every result exactly; prints "digest <hash of all results>" and
// "counters collectives=<n> fused=<n> executed=<n>".
int FusionMix() {
  struct Reduce {
    const char* name;
    int32_t dtype;
    std::vector<int64_t> shape;
    int32_t op;
    double postscale;
  };
  const std::vector<Reduce> reduces = {
      {"a", TUTTI_DTYPE_FLOAT32, {100}, TUTTI_OP_SUM, 1.0},
      {"b", TUTTI_DTYPE_FLOAT32, {30, 10}, TUTTI_OP_SUM, 1.0},
      {"big", TUTTI_DTYPE_FLOAT32, {8192}, TUTTI_OP_SUM, 1.0},  // 32 KiB: above the threshold
      {"c", TUTTI_DTYPE_FLOAT64, {50}, TUTTI_OP_SUM, 1.0},
      {"d", TUTTI_DTYPE_INT32, {70}, TUTTI_OP_SUM, 1.0},
      {"e", TUTTI_DTYPE_FLOAT32, {40}, TUTTI_OP_MAX, 1.0},
      {"f", TUTTI_DTYPE_FLOAT32, {60}, TUTTI_OP_SUM, 0.5},
      {"g", TUTTI_DTYPE_INT32, {80}, TUTTI_OP_AVERAGE, 1.0},
      // Fused pairs whose copy out does more than copy: an integer average divides before its
      // postscale, and bool is made 0 or 1 (Finish() does the same unfused).
      {"h1", TUTTI_DTYPE_INT16, {90}, TUTTI_OP_AVERAGE, 0.5},
      {"h2", TUTTI_DTYPE_INT16, {20}, TUTTI_OP_AVERAGE, 0.5},
      {"m1", TUTTI_DTYPE_BOOL, {33}, TUTTI_OP_MAX, 1.0},
      {"m2", TUTTI_DTYPE_BOOL, {17}, TUTTI_OP_MAX, 1.0},
  };
  const auto c0 = Counters();
  std::vector<Filled> tensors;
  tensors.reserve(32);
  std::vector<tutti_request_t> requests;
  for (const auto& r : reduces) {
    tensors.emplace_back(r.dtype, r.shape, r.op);
    tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
    options.reduce_op = r.op;
    options.postscale_factor = r.postscale;
    tutti_request_t request;
    Check(r.name, tutti_allreduce(rt, r.name, TUTTI_WORLD, &tensors.back().desc,
                                  &tensors.back().desc, &options, &request));
    requests.push_back(request);
  }
  // A group of three float32 sums: fuses with "a" and "b".
  const size_t group_at = tensors.size();
  for (int i = 0; i < 3; ++i) tensors.emplace_back(TUTTI_DTYPE_FLOAT32, std::vector<int64_t>{64}, TUTTI_OP_SUM);
  std::vector<tutti_tensor_t> group = {tensors[group_at].desc, tensors[group_at + 1].desc,
                                       tensors[group_at + 2].desc};
  tutti_request_t grouped;
  Check("grouped", tutti_grouped_allreduce(rt, "grouped", TUTTI_WORLD, 3, group.data(), group.data(),
                                           nullptr, &grouped));
  // Allgathers with uneven rows, reducescatters with rows that do not divide evenly.
  Filled ag1(TUTTI_DTYPE_FLOAT32, {my_rank + 1, 3}, TUTTI_OP_SUM);
  Filled ag2(TUTTI_DTYPE_FLOAT32, {2, 5}, TUTTI_OP_SUM);
  Filled rs1(TUTTI_DTYPE_FLOAT32, {5, 2}, TUTTI_OP_SUM);
  Filled rs2(TUTTI_DTYPE_FLOAT32, {7}, TUTTI_OP_SUM);
  tutti_request_t gathers[2], scatters[2];
  Check("ag1", tutti_allgather(rt, "ag1", TUTTI_WORLD, &ag1.desc, &gathers[0]));
  Check("ag2", tutti_allgather(rt, "ag2", TUTTI_WORLD, &ag2.desc, &gathers[1]));
  Check("rs1", tutti_reducescatter(rt, "rs1", TUTTI_WORLD, &rs1.desc, nullptr, &scatters[0]));
  Check("rs2", tutti_reducescatter(rt, "rs2", TUTTI_WORLD, &rs2.desc, nullptr, &scatters[1]));

  for (size_t i = 0; i < requests.size(); ++i) Wait(reduces[i].name, requests[i]);
  Wait("grouped", grouped);
  for (auto* r : gathers) Wait("allgather", r);
  for (auto* r : scatters) Wait("reducescatter", r);

  uint64_t digest = 0;
  // The postscale after the reduction (and an integer average's truncating division, in
  // Expected): integers truncate toward zero.
  auto scaled = [](double reduced, const Reduce& r) {
    const double v = reduced * r.postscale;
    const bool floating = r.dtype <= TUTTI_DTYPE_FLOAT64;
    return floating ? v : std::trunc(v);
  };
  auto expect = [&](const char* name, const Filled& t, int64_t i, double expected) {
    const double got = t.type->load(t.bytes.data(), i);
    if (got != expected) {
      Say("fail %s: element %" PRId64 " is %g, expected %g", name, i, got, expected);
      std::exit(1);
    }
  };
  for (size_t k = 0; k < reduces.size(); ++k) {
    const auto& t = tensors[k];
    for (int64_t i = 0; i < t.count(); ++i)
      expect(reduces[k].name, t, i, scaled(Expected(i, reduces[k].op, reduces[k].dtype), reduces[k]));
    digest ^= Fnv1a(t.bytes.data(), t.bytes.size()) * (k + 1);
  }
  for (size_t k = group_at; k < group_at + 3; ++k)
    for (int64_t i = 0; i < tensors[k].count(); ++i)
      expect("grouped", tensors[k], i, Expected(i, TUTTI_OP_SUM, TUTTI_DTYPE_FLOAT32));
  // Allgather: member j contributed Contribution(j, i, sum) at its own row-major index i.
  for (int g = 0; g < 2; ++g) {
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    Check("output", tutti_request_output(gathers[g], &out));
    const int64_t cols = g == 0 ? 3 : 5;
    int64_t row = 0;
    for (int32_t j = 0; j < world_size; ++j) {
      const int64_t rows = g == 0 ? j + 1 : 2;
      for (int64_t i = 0; i < rows * cols; ++i) {
        const float got = static_cast<const float*>(out.data)[row * cols + i];
        if (got != static_cast<float>(Contribution(j, i, TUTTI_OP_SUM))) {
          Say("fail ag%d: member %d element %" PRId64 " is %g", g + 1, j, i, got);
          std::exit(1);
        }
      }
      row += rows;
    }
    if (out.shape[0] != row) Die("allgather rows", TUTTI_ERR_INTERNAL);
    digest ^= Fnv1a(out.data, static_cast<size_t>(row * cols * 4)) * (100 + g);
  }
  // Reducescatter: this rank holds its block of rows of the sum.
  for (int g = 0; g < 2; ++g) {
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    Check("output", tutti_request_output(scatters[g], &out));
    const int64_t rows = g == 0 ? 5 : 7, cols = g == 0 ? 2 : 1;
    int64_t first = 0;
    for (int32_t j = 0; j < my_rank; ++j) first += rows / world_size + (j < rows % world_size ? 1 : 0);
    const int64_t mine = rows / world_size + (my_rank < rows % world_size ? 1 : 0);
    if (out.shape[0] != mine) Die("reducescatter rows", TUTTI_ERR_INTERNAL);
    for (int64_t i = 0; i < mine * cols; ++i) {
      const float got = static_cast<const float*>(out.data)[i];
      const double expected = Expected(first * cols + i, TUTTI_OP_SUM, TUTTI_DTYPE_FLOAT32);
      if (got != expected) {
        Say("fail rs%d: element %" PRId64 " is %g, expected %g", g + 1, i, got, expected);
        std::exit(1);
      }
    }
    digest ^= Fnv1a(out.data, static_cast<size_t>(mine * cols * 4)) * (200 + g);
  }
  for (auto* r : requests) tutti_request_free(r);
  tutti_request_free(grouped);
  for (auto* r : gathers) tutti_request_free(r);
  for (auto* r : scatters) tutti_request_free(r);
  const auto c1 = Counters();
  Say("digest %016" PRIx64, digest);
  Say("counters collectives=%" PRIu64 " fused=%" PRIu64 " executed=%" PRIu64,
      c1.collectives - c0.collectives, c1.tensors_fused - c0.tensors_fused,
      c1.tensors_executed - c0.tensors_executed);
  return 0;
}

// `steps` steps of `count` float32 allreduces of 4 KiB, each a separately named async request.
// Prints per step "step <k> collectives=<n> msgs=<n> bytes=<n> full=<n> cached=<n>" (this rank's
// counters for the step) and checks the sums.
int TrainingSteps(int steps, int count) {
  std::vector<Tensor> grads;
  grads.reserve(count);
  for (int i = 0; i < count; ++i) grads.emplace_back(TUTTI_DTYPE_FLOAT32, 1024, 4);
  std::vector<tutti_request_t> requests(count);
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < count; ++i)
      for (int k = 0; k < 1024; ++k) grads[i].as<float>()[k] = static_cast<float>(my_rank + i + step);
    const auto c0 = Counters();
    for (int i = 0; i < count; ++i) {
      const std::string name = "grad." + std::to_string(i);
      Check("allreduce", tutti_allreduce(rt, name.c_str(), TUTTI_WORLD, &grads[i].desc,
                                         &grads[i].desc, nullptr, &requests[i]));
    }
    for (int i = 0; i < count; ++i) {
      Wait("grad", requests[i]);
      tutti_request_free(requests[i]);
    }
    const auto c1 = Counters();
    const float rank_sum = static_cast<float>(world_size * (world_size - 1) / 2);
    for (int i = 0; i < count; ++i)
      if (grads[i].as<float>()[0] != rank_sum + static_cast<float>(world_size * (i + step)) ||
          grads[i].as<float>()[1023] != grads[i].as<float>()[0]) {
        Say("fail grad.%d: %g", i, grads[i].as<float>()[0]);
        return 1;
      }
    Say("step %d collectives=%" PRIu64 " msgs=%" PRIu64 " bytes=%" PRIu64 " full=%" PRIu64
        " cached=%" PRIu64,
        step, c1.collectives - c0.collectives, c1.announce_messages - c0.announce_messages,
        c1.announce_bytes - c0.announce_bytes, c1.tensors_announced - c0.tensors_announced,
        c1.tensors_announced_cached - c0.tensors_announced_cached);
  }
  return 0;
}

// "w" is negotiated twice (cached), then rank 1 changes its shape: every rank must see the
// mismatch ("status w <code> <message>"), never a result. Then all change it: the new shape
// negotiates afresh and reduces correctly, and is cached in turn. Prints "cache <step> full=<n>
// cached=<n>" per step and "cache ok".
int CacheInvalidation() {
  auto step = [](const char* label, int64_t count, bool expect_ok) {
    Tensor t(TUTTI_DTYPE_FLOAT32, count, 4);
    for (int64_t i = 0; i < count; ++i) t.as<float>()[i] = static_cast<float>(my_rank + 1);
    const auto c0 = Counters();
    tutti_status_t status = Allreduce("w", TUTTI_WORLD, t);
    const auto c1 = Counters();
    Say("cache %s full=%" PRIu64 " cached=%" PRIu64, label, c1.tensors_announced - c0.tensors_announced,
        c1.tensors_announced_cached - c0.tensors_announced_cached);
    if (expect_ok != (status == TUTTI_OK)) Die(label, status);
    if (status == TUTTI_OK)
      for (int64_t i = 0; i < count; ++i)
        if (t.as<float>()[i] != static_cast<float>(world_size * (world_size + 1) / 2)) {
          Say("fail %s: element %" PRId64 " is %g", label, i, t.as<float>()[i]);
          std::exit(1);
        }
  };
  step("first", 4, true);
  step("second", 4, true);
  step("changed", my_rank == 1 ? 8 : 4, false);
  step("renegotiated", 8, true);
  step("again", 8, true);
  Say("cache ok");
  return 0;
}

// Eight float32 allreduces submitted at once with priorities 3,0,7,1,7,5,2,6 (names p0..p7).
// The test reads the timeline for the order they ran in.
int Priorities() {
  const int32_t priorities[] = {3, 0, 7, 1, 7, 5, 2, 6};
  std::vector<Tensor> tensors;
  tensors.reserve(8);
  tutti_request_t requests[8];
  for (int i = 0; i < 8; ++i) {
    tensors.emplace_back(TUTTI_DTYPE_FLOAT32, 16, 4);
    tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
    options.priority = priorities[i];
    const std::string name = "p" + std::to_string(i);
    Check("allreduce", tutti_allreduce(rt, name.c_str(), TUTTI_WORLD, &tensors[i].desc,
                                       &tensors[i].desc, &options, &requests[i]));
  }
  for (auto* r : requests) {
    Wait("priority", r);
    tutti_request_free(r);
  }
  Check("timeline", tutti_timeline_stop(rt));
  Say("priorities ok");
  return 0;
}

// Ranks 0 and 1 submit "x", rank 2 submits "z": each waits for members that never come, so the
// stall inspector (thresholds from the test's environment) fails both. Prints
// "status <name> <code> <message>", then meets the others in a barrier.
int Stall() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 4, 4);
  Allreduce(my_rank == 2 ? "z" : "x", TUTTI_WORLD, t);
  // Nobody leaves before every stall was reported: a rank that finalized first would fail the
  // other's tensor with "peer lost" before its own stall deadline.
  tutti_request_t barrier;
  Check("barrier", tutti_barrier(rt, TUTTI_WORLD, &barrier));
  Check("barrier wait", tutti_request_wait(barrier, -1));
  tutti_request_free(barrier);
  return 0;
}

const ScenarioRegistrar registered = {
    {"fusion_mix", FusionMix},
    {"training_steps",
     [](const ScenarioArgs& args) {
       return TrainingSteps(args.size() > 0 ? std::atoi(args[0].c_str()) : 3,
                            args.size() > 1 ? std::atoi(args[1].c_str()) : 200);
     }},
    {"cache_invalidation", CacheInvalidation},
    {"priorities", Priorities},
    {"stall", Stall},
};

}  // namespace
}  // namespace worker
