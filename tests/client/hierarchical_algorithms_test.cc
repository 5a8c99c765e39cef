// The hierarchical collectives (client/exec/hierarchical.h) over real transport contexts in one
// process: N loopback devices whose route planner sees the given hosts, so members of one "host"
// talk over shared memory and the others over TCP; one thread per rank. Each collective runs
// through its Chosen* entry with the hierarchy forced on, on contiguous, interleaved and
// three-per-host layouts, and is compared exactly with a serial reference (small integers in
// float32, so every order of summation agrees); the algorithm each member recorded is checked
// too. These are host ids given to the route planner: tests/multiproc/hierarchical_test.cc runs
// the same collectives on network namespaces.
#include "client/exec/hierarchical.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "client/client_test_support.h"

namespace tutti::client {
namespace {

using namespace tutti::testing;

float Value(size_t rank, size_t j) { return static_cast<float>((j * 7 + rank * 13) % 101); }

// Runs fn(ring, rank) on every rank of a fresh job whose rank r sits on hosts[r], the hierarchy
// forced on; every rank must record `expected` as the algorithm that ran.
void OnEveryRank(const std::vector<std::string>& hosts, Algorithm expected,
                 const std::function<Status(const RingArgs&, size_t)>& fn) {
  const size_t n = hosts.size();
  LoopbackJob job(n, hosts);
  ASSERT_EQ(job.size(), n);
  std::vector<int32_t> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  const MemberList members(ranks);
  const SetTopology topology = TopologyOf(members, hosts, HierarchyMode::kOn, 0);
  std::vector<std::unique_ptr<transport::Context>> contexts(n);
  RunOnThreads(n, [&](size_t r) {
    contexts[r] = job.Context(r, 0, "auto");
    if (!contexts[r]) return;
    std::vector<char> scratch;
    Algorithm ran = Algorithm::kNone;
    const RingArgs ring{contexts[r].get(), &members, static_cast<int32_t>(r),
                        std::chrono::duration_cast<std::chrono::milliseconds>(kPatience),
                        &scratch, &topology, &ran};
    EXPECT_TRUE(IsOk(fn(ring, r))) << "rank " << r;
    EXPECT_EQ(AlgorithmName(ran), std::string(AlgorithmName(expected))) << "rank " << r;
  });
}

const std::vector<std::vector<std::string>> kLayouts = {
    {"a", "a", "b", "b"},            // 2 hosts x 2, consecutive ranks
    {"a", "b", "c", "a", "b", "c"},  // 3 hosts x 2, interleaved
    {"a", "a", "a", "b", "b", "b"},  // 2 hosts x 3
};

TEST(HierarchicalCollectives, AllreduceMatchesTheSerialSum) {
  for (const auto& hosts : kLayouts) {
    const size_t n = hosts.size(), count = (1 << 18) + 5;
    OnEveryRank(hosts, Algorithm::kHierarchical, [&](const RingArgs& ring, size_t r) {
      std::vector<float> data(count);
      for (size_t j = 0; j < count; ++j) data[j] = Value(r, j);
      TUTTI_RETURN_IF_ERROR(ChosenAllreduce(ring, data.data(), count, DType::kFloat32, ReduceOp::kSum));
      for (size_t j = 0; j < count; ++j) {
        float want = 0;
        for (size_t q = 0; q < n; ++q) want += Value(q, j);
        if (data[j] != want) return Status(Code::kInternal, "element " + std::to_string(j));
      }
      return Status::Ok();
    });
  }
}

TEST(HierarchicalCollectives, AllgatherOfUnevenRowsMatchesTheSerialConcatenation) {
  for (const auto& hosts : kLayouts) {
    const size_t n = hosts.size(), row = 1000;
    // Member i contributes 3 + 5i rows, one of them none.
    std::vector<int64_t> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = i == 1 ? 0 : static_cast<int64_t>(3 + 5 * i);
    ChunkLayout chunks;
    size_t total = 0;
    for (int64_t r : rows) {
      chunks.begin.push_back(total * sizeof(float));
      chunks.size.push_back(static_cast<size_t>(r) * row * sizeof(float));
      total += static_cast<size_t>(r) * row;
    }
    OnEveryRank(hosts, Algorithm::kHierarchical, [&](const RingArgs& ring, size_t r) {
      std::vector<float> data(total, -1.0f);
      for (size_t j = 0; j < chunks.size[r] / sizeof(float); ++j)
        data[chunks.begin[r] / sizeof(float) + j] = Value(r, j);
      TUTTI_RETURN_IF_ERROR(ChosenAllgather(ring, reinterpret_cast<char*>(data.data()), chunks));
      for (size_t q = 0; q < n; ++q)
        for (size_t j = 0; j < chunks.size[q] / sizeof(float); ++j)
          if (data[chunks.begin[q] / sizeof(float) + j] != Value(q, j))
            return Status(Code::kInternal, "member " + std::to_string(q) + " element " + std::to_string(j));
      return Status::Ok();
    });
  }
}

TEST(HierarchicalCollectives, ReducescatterLeavesEachMemberItsReducedChunk) {
  for (const auto& hosts : kLayouts) {
    const size_t n = hosts.size(), count = 100003;
    const ChunkLayout chunks = EvenChunks(count, n, sizeof(float));
    OnEveryRank(hosts, Algorithm::kHierarchical, [&](const RingArgs& ring, size_t r) {
      std::vector<float> data(count);
      for (size_t j = 0; j < count; ++j) data[j] = Value(r, j);
      TUTTI_RETURN_IF_ERROR(ChosenReducescatter(ring, reinterpret_cast<char*>(data.data()), chunks,
                                                DType::kFloat32, ReduceOp::kSum));
      const size_t first = chunks.begin[r] / sizeof(float);
      for (size_t j = first; j < first + chunks.size[r] / sizeof(float); ++j) {
        float want = 0;
        for (size_t q = 0; q < n; ++q) want += Value(q, j);
        if (data[j] != want) return Status(Code::kInternal, "element " + std::to_string(j));
      }
      return Status::Ok();
    });
  }
}

TEST(HierarchicalCollectives, BroadcastFromEveryRootReachesEveryMember) {
  for (const auto& hosts : kLayouts) {
    const size_t n = hosts.size(), bytes = (1 << 20) + 3;  // slices of unequal size
    for (size_t root = 0; root < n; ++root)
      OnEveryRank(hosts, Algorithm::kHierarchical, [&](const RingArgs& ring, size_t r) {
        std::vector<char> data(bytes, 0);
        if (r == root)
          for (size_t j = 0; j < bytes; ++j) data[j] = static_cast<char>(j * 31 + root);
        TUTTI_RETURN_IF_ERROR(ChosenBroadcast(ring, data.data(), bytes, static_cast<int32_t>(root)));
        for (size_t j = 0; j < bytes; ++j)
          if (data[j] != static_cast<char>(j * 31 + root))
            return Status(Code::kInternal, "byte " + std::to_string(j) + " from root " + std::to_string(root));
        return Status::Ok();
      });
  }
}

TEST(HierarchicalCollectives, FlatWhereTheHostsAreUneven) {
  const std::vector<std::string> hosts = {"a", "a", "a", "b"};
  OnEveryRank(hosts, Algorithm::kTree, [&](const RingArgs& ring, size_t r) {
    std::vector<char> data(4096, r == 3 ? 7 : 0);
    TUTTI_RETURN_IF_ERROR(ChosenBroadcast(ring, data.data(), data.size(), 3));
    for (char c : data)
      if (c != 7) return Status(Code::kInternal, "not broadcast");
    return Status::Ok();
  });
}

}  // namespace
}  // namespace tutti::client
