// Per-set negotiation: completion, agreement checks, errors for the announcing rank.
#include <gtest/gtest.h>

#include "server/core/negotiator.h"
#include "unit/test_specs.h"

namespace tutti::server {
namespace {

TEST(Negotiator, ReleasesWhenEveryMemberAnnounced) {
  Negotiator n(3, {1, 4, 6});
  std::vector<wire::Response> ready;
  ASSERT_TRUE(n.Announce(4, Spec("a", 2), &ready).ok());
  ASSERT_TRUE(n.Announce(1, Spec("b", 2), &ready).ok());
  ASSERT_TRUE(n.Announce(6, Spec("a", 2), &ready).ok());
  EXPECT_TRUE(ready.empty());
  ASSERT_TRUE(n.Announce(1, Spec("a", 2), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].spec().name(), "a");
  EXPECT_FALSE(ready[0].has_error());
  EXPECT_EQ(n.TakeSeq(), 0u);
  EXPECT_EQ(n.TakeSeq(), 1u);
}

TEST(Negotiator, MismatchNamesBothVariants) {
  Negotiator n(0, {0, 1, 2});
  std::vector<wire::Response> ready;
  auto scaled = Spec("g", 4);
  scaled.set_postscale(0.5);
  ASSERT_TRUE(n.Announce(0, Spec("g", 4), &ready).ok());
  ASSERT_TRUE(n.Announce(2, scaled, &ready).ok());
  ASSERT_TRUE(n.Announce(1, Spec("g", 4), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].error().code(), static_cast<int>(Code::kMismatch));
  EXPECT_EQ(ready[0].error().message(),
            "mismatched 'g' on process set 0: rank 0 sent allreduce float32[4] op=sum, rank 2 sent "
            "allreduce float32[4] op=sum postscale=0.5");
}

TEST(Negotiator, AlltoallSplitsThatDoNotFitTheSetFailOnEveryMember) {
  Negotiator n(4, {0, 1, 2});
  std::vector<wire::Response> ready;
  for (int32_t rank : {0, 1, 2}) {
    wire::TensorSpec spec = Spec("a", 6);
    spec.set_kind(wire::COLLECTIVE_ALLTOALL);
    for (int i = 0; i < (rank == 1 ? 2 : 3); ++i) spec.add_splits(2);
    ASSERT_TRUE(n.Announce(rank, spec, &ready).ok());
  }
  ASSERT_EQ(ready.size(), 1u);  // one response, sent to every member
  EXPECT_EQ(ready[0].error().code(), static_cast<int>(Code::kInvalidArgument));
  EXPECT_EQ(ready[0].error().message(), "alltoall 'a': rank 1 gave 2 splits for a set of 3 ranks");
}

TEST(Negotiator, JoinedMembersAreNotWaitedFor) {
  Negotiator n(0, {0, 1, 2});
  std::vector<wire::Response> ready;
  wire::TensorSpec gather = Spec("g", 2);
  gather.set_kind(wire::COLLECTIVE_ALLGATHER);
  ASSERT_TRUE(n.Announce(0, gather, &ready).ok());
  ASSERT_TRUE(n.Announce(2, gather, &ready).ok());
  int32_t last = -1;
  EXPECT_FALSE(n.Join(1, &ready, &last));  // releases 'g' at once, with no rows from rank 1
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>(ready[0].member_rows().begin(), ready[0].member_rows().end()),
            (std::vector<int64_t>{2, 0, 2}));
  wire::TensorSpec scatter = Spec("s", 3);
  scatter.set_kind(wire::COLLECTIVE_REDUCESCATTER);
  ASSERT_TRUE(n.Announce(0, scatter, &ready).ok());
  ASSERT_TRUE(n.Announce(2, scatter, &ready).ok());
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[1].error().message(),
            "reducescatter 's' cannot run on process set 0 while rank 1 has joined");
  EXPECT_FALSE(n.Join(0, &ready, &last));
  EXPECT_TRUE(n.Join(2, &ready, &last));
  EXPECT_EQ(last, 2);
}

TEST(Negotiator, ErrorsConcernOnlyTheAnnouncingRank) {
  Negotiator n(2, {0, 1});
  std::vector<wire::Response> ready;
  Status status = n.Announce(5, Spec("x", 1), &ready);
  EXPECT_EQ(status.code(), Code::kNotAMember);
  EXPECT_EQ(status.message(), "rank 5 is not a member of process set 2");
  ASSERT_TRUE(n.Announce(0, Spec("x", 1), &ready).ok());
  status = n.Announce(0, Spec("x", 1), &ready);
  EXPECT_EQ(status.code(), Code::kDuplicateName);
  EXPECT_EQ(status.message(), "rank 0 announced 'x' twice on process set 2");
}

TEST(Negotiator, FailPendingInFirstAnnouncedOrder) {
  Negotiator n(7, {0, 1});
  std::vector<wire::Response> out;
  ASSERT_TRUE(n.Announce(1, Spec("second", 1), &out).ok());
  ASSERT_TRUE(n.Announce(0, Spec("first", 1), &out).ok());
  n.FailPending(Status(Code::kSetRemoved, "process set 7 was removed"), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].spec().name(), "second");
  EXPECT_EQ(out[1].error().message(), "process set 7 was removed while 'first' was pending");
  EXPECT_EQ(out[1].error().code(), static_cast<int>(Code::kSetRemoved));
}

}  // namespace
}  // namespace tutti::server
