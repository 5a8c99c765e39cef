// Out-of-place allreduce (AllreduceInto, client/exec/collectives.h, with input != output): the
// algorithms read the input where it is instead of reducing a copy of it. For every algorithm
// ChosenAllreduce can pick (direct, the ring over TCP, the shared-memory relay with and without
// middle steps, the hierarchy with direct and ring shards, a set of one) and every dtype, op and
// pair of scale factors, each rank runs the collective in place and then out of place from the
// same input; the output must hold the in-place result bit for bit, every byte of it written (it
// starts as garbage), and the input must be unchanged. Over real loopback transports, one thread
// per rank, as tests/client/ring_allreduce_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "client/client_test_support.h"
#include "client/exec/collectives.h"
#include "client/exec/hierarchical.h"
#include "client/kernels/half.h"
#include "client/kernels/stream_copy.h"

namespace tutti::client {
namespace {

using namespace tutti::testing;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                             DType::kInt8,    DType::kUInt8,    DType::kInt32,   DType::kInt64,
                             DType::kInt16,   DType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProduct};
struct Scales {
  double pre, post;
};
// 0.3 and 1.7 round differently in every dtype and truncate integers.
constexpr Scales kScales[] = {{1.0, 1.0}, {0.5, 1.0}, {1.0, 3.0}, {0.3, 1.7}};

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's input: fractions whose sums round (floating), full-range bits (integers, so sums and
// products wrap), and bool bytes 0, 1 and 2 (so normalisation matters).
std::vector<char> Input(size_t rank, DType dtype, size_t count) {
  std::vector<char> data(count * ElementSize(dtype));
  for (size_t j = 0; j < count; ++j) {
    const uint64_t h = Mix(rank * 1000003 + j * 7 + static_cast<uint64_t>(dtype));
    const float f = static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 7.0f;
    char* at = data.data() + j * ElementSize(dtype);
    switch (dtype) {
      case DType::kFloat16: { const uint16_t v = FloatToHalf(f / 64); std::memcpy(at, &v, 2); break; }
      case DType::kBFloat16: { const uint16_t v = FloatToBFloat16(f); std::memcpy(at, &v, 2); break; }
      case DType::kFloat32: std::memcpy(at, &f, 4); break;
      case DType::kFloat64: { const double v = f / 3.0; std::memcpy(at, &v, 8); break; }
      case DType::kBool: *at = static_cast<char>(h % 3); break;
      default: std::memcpy(at, &h, ElementSize(dtype));
    }
  }
  return data;
}

// One algorithm's setting: the hosts of the ranks (several: hierarchical, forced on), the
// transport, the small-allreduce cut-off and the algorithm every rank must record.
struct Setting {
  std::vector<std::string> hosts;
  std::string transport;
  size_t small_allreduce_bytes;
  Algorithm expected;
  std::vector<size_t> counts = {0, 2, 1003};
  // Short ring segments, so that the pipelined combines run on pieces of a chunk.
  size_t pipeline_bytes = 256;
  bool all_combinations = true;  // else float32 and bfloat16 only, to keep large buffers quick
};

void ExpectOutOfPlaceMatchesInPlace(const Setting& setting) {
  const size_t n = setting.hosts.size();
  LoopbackJob job(n, setting.hosts);
  ASSERT_EQ(job.size(), n);
  std::vector<int32_t> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  const MemberList members(ranks);
  const SetTopology topology = TopologyOf(members, setting.hosts, HierarchyMode::kOn, 0);
  const bool hierarchical = setting.expected == Algorithm::kHierarchical;
  std::vector<std::unique_ptr<transport::Context>> contexts(n);
  RunOnThreads(n, [&](size_t r) {
    contexts[r] = job.Context(r, 0, setting.transport);
    if (!contexts[r]) return;
    std::vector<char> scratch;
    Algorithm ran = Algorithm::kNone;
    RingArgs ring{contexts[r].get(), &members, static_cast<int32_t>(r),
                  std::chrono::duration_cast<std::chrono::milliseconds>(kPatience),
                  &scratch, hierarchical ? &topology : nullptr, &ran};
    ring.cutoffs.small_allreduce_bytes = setting.small_allreduce_bytes;
    ring.cutoffs.pipeline_bytes = setting.pipeline_bytes;
    for (DType dtype : kDTypes) {
      if (!setting.all_combinations && dtype != DType::kFloat32 && dtype != DType::kBFloat16)
        continue;
      for (ReduceOp op : kOps)
        for (const Scales& scales : kScales)
          for (size_t count : setting.counts) {
            // bool takes no average and no factor (the C API refuses them).
            if (dtype == DType::kBool && (op == ReduceOp::kAverage || scales.pre != 1.0 ||
                                          scales.post != 1.0))
              continue;
            if (!setting.all_combinations && op != ReduceOp::kSum && op != ReduceOp::kAverage)
              continue;
            const std::string what = std::string(DTypeName(static_cast<int32_t>(dtype))) + " " +
                                     ReduceOpName(static_cast<int32_t>(op)) + " x" +
                                     std::to_string(scales.pre) + " x" +
                                     std::to_string(scales.post) + " of " +
                                     std::to_string(count) + ", rank " + std::to_string(r);
            const std::vector<char> input = Input(r, dtype, count);
            std::vector<char> in_place = input, out_of_place_input = input;
            std::vector<char> output(input.size(), static_cast<char>(0xA5));
            EXPECT_TRUE(IsOk(AllreduceInto(ring, in_place.data(), in_place.data(), count, dtype,
                                           op, scales.pre, scales.post)))
                << what;
            if (count > 0) EXPECT_EQ(AlgorithmName(ran), std::string(AlgorithmName(setting.expected))) << what;
            EXPECT_TRUE(IsOk(AllreduceInto(ring, out_of_place_input.data(), output.data(), count,
                                           dtype, op, scales.pre, scales.post)))
                << what;
            EXPECT_TRUE(out_of_place_input == input) << what << ": the input changed";
            EXPECT_TRUE(output == in_place) << what << ": out of place differs from in place";
          }
    }
  });
}

constexpr size_t kAlwaysDirect = size_t{1} << 40, kNeverDirect = 0;

TEST(OutOfPlaceAllreduce, RingOverTcpMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h", "h", "h"}, "tcp", kNeverDirect, Algorithm::kRing});
}

TEST(OutOfPlaceAllreduce, DirectOverTcpMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h", "h", "h"}, "tcp", kAlwaysDirect, Algorithm::kDirect});
}

TEST(OutOfPlaceAllreduce, RelayOfThreeOverSharedMemoryMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h", "h", "h"}, "shm", kNeverDirect, Algorithm::kRing});
}

// Two ranks: the relay's reduce-scatter has no middle step.
TEST(OutOfPlaceAllreduce, RelayOfTwoOverSharedMemoryMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h", "h"}, "shm", kNeverDirect, Algorithm::kRing});
}

TEST(OutOfPlaceAllreduce, DirectOverSharedMemoryMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h", "h", "h"}, "shm", kAlwaysDirect, Algorithm::kDirect});
}

// Shards of at most the cut-off cross hosts with the direct exchange, larger ones with the ring.
TEST(OutOfPlaceAllreduce, HierarchicalWithDirectShardsMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"a", "a", "b", "b"}, "auto", kAlwaysDirect,
                                  Algorithm::kHierarchical});
}

TEST(OutOfPlaceAllreduce, HierarchicalWithRingShardsMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"a", "b", "a", "b"}, "auto", kNeverDirect,
                                  Algorithm::kHierarchical});
}

TEST(OutOfPlaceAllreduce, HierarchicalOfThreePerHostMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"a", "a", "a", "b", "b", "b"}, "auto", kNeverDirect,
                                  Algorithm::kHierarchical});
}

// Nothing to exchange: the result is the scaled input (then finished).
TEST(OutOfPlaceAllreduce, SetOfOneMatchesInPlace) {
  ExpectOutOfPlaceMatchesInPlace({{"h"}, "auto", kNeverDirect, Algorithm::kRing});
  ExpectOutOfPlaceMatchesInPlace({{"h"}, "auto", kAlwaysDirect, Algorithm::kDirect});
}

// Chunks of over a MiB: several default ring segments over TCP, several relay slices over
// shared memory.
TEST(OutOfPlaceAllreduce, LargeBuffersMatchInPlace) {
  const size_t large = (3 << 20) / sizeof(float) + 7;
  for (const auto& [hosts, transport, expected] :
       std::vector<std::tuple<std::vector<std::string>, std::string, Algorithm>>{
           {{"h", "h", "h"}, "tcp", Algorithm::kRing},
           {{"h", "h", "h"}, "shm", Algorithm::kRing},
           {{"a", "a", "b", "b"}, "auto", Algorithm::kHierarchical}}) {
    Setting setting{hosts, transport, kDirectAllreduceMaxBytes, expected, {large}};
    setting.pipeline_bytes = kRingSegmentBytes;
    setting.all_combinations = false;
    ExpectOutOfPlaceMatchesInPlace(setting);
  }
}

// Results of kStreamingStoreMinBytes and more: the relay writes them with streaming stores
// (its last reduce-scatter step and its allgather), same bits. Odd counts, so that chunks and
// slices start at every alignment; bfloat16 just over the threshold, float32 at twice it.
TEST(OutOfPlaceAllreduce, StreamedRelayResultsMatchInPlace) {
  const size_t count = kStreamingStoreMinBytes / 2 + 7;
  for (const std::vector<std::string>& hosts :
       {std::vector<std::string>{"h", "h"}, std::vector<std::string>{"h", "h", "h"}}) {
    Setting setting{hosts, "shm", kNeverDirect, Algorithm::kRing, {count}};
    setting.pipeline_bytes = kRingSegmentBytes;
    setting.all_combinations = false;
    ExpectOutOfPlaceMatchesInPlace(setting);
  }
}

}  // namespace
}  // namespace tutti::client
