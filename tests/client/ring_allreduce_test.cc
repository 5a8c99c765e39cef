// The ring algorithms (client/exec/ring_allreduce.h) over real transport contexts in one process:
// N loopback devices with one job secret, routes planned by PlanRoutes, one context per rank
// for set 0 and one thread per rank. RingAllreduce of float32 sums for N = 2 and 3, over TCP
// (reduce-scatter then allgather, pipelined in segments) and over shared memory (where every
// pair relays in place, so it takes RelayAllreduce), and DirectAllreduce; results are compared
// exactly with a serial reference (integer-valued floats, so every order of summation agrees).
// Also the chunk layout every rank derives alike.
#include "client/exec/ring_allreduce.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/client_test_support.h"

namespace tutti::client {
namespace {

using namespace tutti::testing;

// Rank r's input: small integers, distinct per rank and position.
std::vector<float> Input(size_t rank, size_t count) {
  std::vector<float> data(count);
  for (size_t j = 0; j < count; ++j) data[j] = static_cast<float>((j * 7 + rank * 13) % 101);
  return data;
}

std::vector<float> Reference(size_t n, size_t count) {
  std::vector<float> sum(count, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    const std::vector<float> input = Input(r, count);
    for (size_t j = 0; j < count; ++j) sum[j] += input[j];
  }
  return sum;
}

using Algorithm = Status (*)(const RingArgs&, void*, size_t, DType, ReduceOp,
                               const Contribution&);

// Runs `algorithm` on every rank of a fresh job at once; expects the serial reference on each.
// Returns whether every rank's context would relay in place.
bool ExpectAllreduceMatchesReference(size_t n, size_t count, const std::string& transport,
                                     Algorithm algorithm = RingAllreduce) {
  LoopbackJob job(n);
  if (job.size() != n) return false;
  std::vector<int32_t> ranks;
  for (size_t r = 0; r < n; ++r) ranks.push_back(static_cast<int32_t>(r));
  const MemberList members(ranks);
  const std::vector<float> expected = Reference(n, count);
  std::vector<char> relays(n, 0);
  // Contexts outlive every rank's run: a rank done early must not close a pair its neighbour
  // still reads from (a lane's context lives as long as its set).
  std::vector<std::unique_ptr<transport::Context>> contexts(n);
  RunOnThreads(n, [&](size_t r) {
    contexts[r] = job.Context(r, 0, transport);
    transport::Context* context = contexts[r].get();
    if (!context) return;
    relays[r] = context->CanRelayInPlace(members.ranks());
    std::vector<char> scratch;
    const RingArgs ring{context, &members, static_cast<int32_t>(r),
                        std::chrono::duration_cast<std::chrono::milliseconds>(kPatience),
                        &scratch};
    std::vector<float> data = Input(r, count);
    Status status = algorithm(ring, data.data(), count, DType::kFloat32, ReduceOp::kSum, {});
    EXPECT_TRUE(IsOk(status)) << "rank " << r;
    size_t wrong = 0, first_wrong = count;
    for (size_t j = 0; j < count; ++j)
      if (data[j] != expected[j] && wrong++ == 0) first_wrong = j;
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": first difference at element " << first_wrong
                         << " of " << count;
  });
  for (char relay : relays)
    if (!relay) return false;
  return true;
}

// Over a MiB per chunk: several ring segments and, on shared memory, several relay slices.
constexpr size_t kLarge = (3 << 20) / sizeof(float) + 7;

TEST(RingAllreduce, TwoRanksOverTcpMatchTheSerialSum) {
  EXPECT_FALSE(ExpectAllreduceMatchesReference(2, kLarge, "tcp"));
}

TEST(RingAllreduce, ThreeRanksOverTcpMatchTheSerialSum) {
  EXPECT_FALSE(ExpectAllreduceMatchesReference(3, kLarge, "tcp"));
}

TEST(RingAllreduce, TwoRanksOverSharedMemoryRelayInPlaceAndMatchTheSerialSum) {
  EXPECT_TRUE(ExpectAllreduceMatchesReference(2, kLarge, "auto"));
}

TEST(RingAllreduce, ThreeRanksOverSharedMemoryRelayInPlaceAndMatchTheSerialSum) {
  EXPECT_TRUE(ExpectAllreduceMatchesReference(3, kLarge, "shm"));
}

TEST(RingAllreduce, FewerElementsThanRanksLeaveEmptyChunksOverTcp) {
  ExpectAllreduceMatchesReference(3, 2, "tcp");
}

TEST(RingAllreduce, FewerElementsThanRanksLeaveEmptyChunksOverSharedMemory) {
  EXPECT_TRUE(ExpectAllreduceMatchesReference(3, 2, "shm"));
}

TEST(DirectAllreduce, ThreeRanksOverTcpMatchTheSerialSum) {
  ExpectAllreduceMatchesReference(3, kDirectAllreduceMaxBytes / sizeof(float), "tcp",
                                  DirectAllreduce);
}

TEST(DirectAllreduce, ThreeRanksOverSharedMemoryMatchTheSerialSum) {
  ExpectAllreduceMatchesReference(3, 1001, "shm", DirectAllreduce);
}

TEST(EvenChunks, FirstChunksTakeTheRemainder) {
  const ChunkLayout layout = EvenChunks(10, 3, 4);
  EXPECT_EQ(layout.begin, (std::vector<size_t>{0, 16, 28}));
  EXPECT_EQ(layout.size, (std::vector<size_t>{16, 12, 12}));
  const ChunkLayout sparse = EvenChunks(2, 3, 8);
  EXPECT_EQ(sparse.begin, (std::vector<size_t>{0, 8, 16}));
  EXPECT_EQ(sparse.size, (std::vector<size_t>{8, 8, 0}));
}

TEST(MemberList, PositionsAndRingNeighboursFollowTheSortedRanks) {
  const MemberList members({1, 4, 9});
  EXPECT_EQ(members.IndexOf(1), 0u);
  EXPECT_EQ(members.IndexOf(9), 2u);
  EXPECT_TRUE(members.Contains(4));
  EXPECT_FALSE(members.Contains(5));
  EXPECT_EQ(members.Next(4), 9);
  EXPECT_EQ(members.Next(9), 1);
  EXPECT_EQ(members.Previous(1), 9);
  EXPECT_EQ(members.Previous(9), 4);
}

}  // namespace
}  // namespace tutti::client
