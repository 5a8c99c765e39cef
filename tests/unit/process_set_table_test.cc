// Process-set table rules, driven with explicit time.
#include <gtest/gtest.h>

#include "server/core/process_set_table.h"

namespace tutti::server {
namespace {

const Clock::time_point t0{};

TEST(ProcessSetTable, NormalizeNamesOffendingRanks) {
  std::vector<int32_t> ranks = {3, 1, 9, -1};
  Status status = ProcessSetTable::Normalize(4, &ranks);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "ranks [-1, 9] are outside the world of 4 ranks");
  ranks = {2, 0, 2, 2, 1, 0};
  status = ProcessSetTable::Normalize(4, &ranks);
  EXPECT_EQ(status.message(), "ranks [0, 2] are listed more than once");
  ranks = {};
  EXPECT_EQ(ProcessSetTable::Normalize(4, &ranks).message(), "a process set needs at least one rank");
  ranks = {3, 0};
  EXPECT_TRUE(ProcessSetTable::Normalize(4, &ranks).ok());
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 3}));
}

TEST(ProcessSetTable, MembersWaitForEachOtherNonMembersDoNot) {
  ProcessSetTable table(4);
  ProcessSetTable::Events events;
  table.Add(2, 10, {1, 0}, 1000, t0, &events);  // non-member: answered at once, set pending
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_EQ(events.replies[0].rank, 2);
  EXPECT_EQ(events.replies[0].set_id, 1);
  EXPECT_TRUE(events.activated.empty());
  const std::vector<int32_t>* members = nullptr;
  EXPECT_EQ(table.Members(1, &members).message(),
            "process set 1 is still being added: not every member called add");

  events = {};
  table.Add(0, 11, {0, 1}, 1000, t0, &events);  // first member waits
  EXPECT_TRUE(events.replies.empty());
  table.Add(1, 12, {1, 0}, 1000, t0, &events);  // last member completes it for both
  ASSERT_EQ(events.replies.size(), 2u);
  EXPECT_EQ(events.activated, std::vector<int32_t>{1});
  ASSERT_TRUE(table.Members(1, &members).ok());
  EXPECT_EQ(*members, (std::vector<int32_t>{0, 1}));

  events = {};
  table.Add(0, 13, {0, 1}, 1000, t0, &events);  // adding an existing set returns its id
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_EQ(events.replies[0].set_id, 1);
}

TEST(ProcessSetTable, ANonMemberLearnsTheIdOfASetWhoseMembersHaveLeft) {
  ProcessSetTable table(4);
  ProcessSetTable::Events events;
  table.Add(1, 10, {1, 3}, 1000, t0, &events);
  table.Add(3, 11, {1, 3}, 1000, t0, &events);
  ASSERT_EQ(events.activated, (std::vector<int32_t>{1}));
  const Status left(Code::kPeerLost, "peer lost: rank 1 finalized");
  table.MarkLost(1, left, &events);

  events = {};
  table.Add(2, 12, {3, 1}, 1000, t0, &events);  // the members were faster, even to finalize
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_TRUE(events.replies[0].status.ok()) << events.replies[0].status.message();
  EXPECT_EQ(events.replies[0].set_id, 1);

  events = {};
  table.Add(3, 13, {1, 3}, 1000, t0, &events);  // a member learns why the set is broken
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_EQ(events.replies[0].status.message(), "peer lost: rank 1 finalized");

  events = {};
  table.Add(2, 14, {0, 1}, 1000, t0, &events);  // a set never made with a lost rank: refused
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_EQ(events.replies[0].status.message(), "peer lost: rank 1 finalized");
}

TEST(ProcessSetTable, IdsAreNeverReused) {
  ProcessSetTable table(2);
  ProcessSetTable::Events events;
  table.Add(0, 1, {0}, 1000, t0, &events);
  EXPECT_EQ(events.activated, std::vector<int32_t>{1});
  table.Remove(0, 2, 1, 1000, t0, &events);
  EXPECT_EQ(events.removed, std::vector<int32_t>{1});
  const std::vector<int32_t>* members = nullptr;
  EXPECT_EQ(table.Members(1, &members).message(), "process set 1 was removed");
  EXPECT_EQ(table.Members(5, &members).message(), "process set 5 does not exist");
  events = {};
  table.Add(0, 3, {0}, 1000, t0, &events);
  EXPECT_EQ(events.activated, std::vector<int32_t>{2});
}

TEST(ProcessSetTable, RemoveRules) {
  ProcessSetTable table(3);
  ProcessSetTable::Events events;
  table.Remove(0, 1, 0, 1000, t0, &events);
  EXPECT_EQ(events.replies[0].status.message(), "the world process set (0) cannot be removed");
  events = {};
  table.Add(0, 2, {0, 1}, 1000, t0, &events);
  table.Add(1, 3, {0, 1}, 1000, t0, &events);
  events = {};
  table.Remove(2, 4, 1, 1000, t0, &events);  // non-member: answered, nothing removed
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_TRUE(events.replies[0].status.ok());
  EXPECT_TRUE(events.removed.empty());
  table.Remove(0, 5, 1, 1000, t0, &events);
  table.Remove(0, 6, 1, 1000, t0, &events);  // twice from one rank
  EXPECT_EQ(events.replies.back().status.message(), "rank 0 already waits on a change of process set 1");
  table.Remove(1, 7, 1, 1000, t0, &events);
  EXPECT_EQ(events.removed, std::vector<int32_t>{1});
}

TEST(ProcessSetTable, NonMemberRemovesASetStillBeingAddedWithoutWaiting) {
  ProcessSetTable table(3);
  ProcessSetTable::Events events;
  table.Add(2, 1, {0, 1}, 1000, t0, &events);  // pending: 0 and 1 have not added it yet
  table.Remove(2, 2, 1, 1000, t0, &events);
  ASSERT_EQ(events.replies.size(), 2u);
  EXPECT_TRUE(events.replies[1].status.ok());
  events = {};
  table.Remove(0, 3, 1, 1000, t0, &events);  // a member cannot remove what it has not added
  EXPECT_EQ(events.replies[0].status.message(),
            "process set 1 is still being added: not every member called add");
}

TEST(ProcessSetTable, WaitersTimeOutNamingMissingRanks) {
  ProcessSetTable table(4);
  ProcessSetTable::Events events;
  table.Add(1, 7, {1, 2, 3}, 500, t0, &events);
  EXPECT_EQ(table.NextDeadline(), t0 + std::chrono::milliseconds(500));
  table.Expire(t0 + std::chrono::milliseconds(499), &events);
  EXPECT_TRUE(events.replies.empty());
  table.Expire(t0 + std::chrono::milliseconds(500), &events);
  ASSERT_EQ(events.replies.size(), 1u);
  EXPECT_EQ(events.replies[0].status.code(), Code::kTimeout);
  EXPECT_EQ(events.replies[0].status.message(),
            "process set 1 add of [1, 2, 3] timed out after 500 ms: ranks [2, 3] never arrived");
  EXPECT_FALSE(table.NextDeadline().has_value());
}

TEST(ProcessSetTable, StaticSets) {
  ProcessSetTable table(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(table.DefineStatic({{0, 1}, {3, 2}}, &ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  ProcessSetTable other(4);
  ids.clear();
  Status status = other.DefineStatic({{0, 1}, {1, 0}}, &ids);
  EXPECT_EQ(status.message(), "static process set 2 repeats the ranks [0, 1] of set 1");
  ProcessSetTable whole(2);
  status = whole.DefineStatic({{1, 0}}, &ids);
  EXPECT_EQ(status.message(), "static process set 1 repeats the ranks [0, 1] of set 0 (the world)");
}

}  // namespace
}  // namespace tutti::server
