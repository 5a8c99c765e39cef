// PendingTable (client/pending_table.h), where the I/O thread finds the request a response
// names: all-or-none insertion with the exact kDuplicateName message, Take by (set, name),
// TakeSet sweeping a set, and which sets sets() lists as entries come and go.
#include "client/pending_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/client_test_support.h"

namespace tutti::client {
namespace {

using namespace tutti::testing;

std::shared_ptr<Request> Named(const std::string& name) {
  Request::Operation op;
  op.spec.set_name(name);
  return std::make_shared<Request>(std::move(op));
}

TEST(PendingTable, InsertedRequestsAreTakenBySetAndNameOnce) {
  PendingTable table;
  auto a = Named("a"), b = Named("b");
  ASSERT_TRUE(IsOk(table.InsertAll(3, {a, b})));
  EXPECT_EQ(table.Take(3, "b"), b);
  EXPECT_EQ(table.Take(3, "b"), nullptr);
  EXPECT_EQ(table.Take(4, "a"), nullptr);  // another set
  EXPECT_EQ(table.Take(3, "a"), a);
}

TEST(PendingTable, DuplicateNameOnTheSetIsRefusedWithTheSetAndName) {
  PendingTable table;
  ASSERT_TRUE(IsOk(table.InsertAll(3, {Named("grad")})));
  EXPECT_TRUE(IsStatus(table.InsertAll(3, {Named("grad")}), Code::kDuplicateName,
                       "a request named 'grad' is already pending on process set 3"));
}

TEST(PendingTable, RefusedInsertionInsertsNoneOfTheRequests) {
  PendingTable table;
  auto first = Named("b");
  ASSERT_TRUE(IsOk(table.InsertAll(1, {first})));
  EXPECT_TRUE(IsStatus(table.InsertAll(1, {Named("a"), Named("b"), Named("c")}),
                       Code::kDuplicateName,
                       "a request named 'b' is already pending on process set 1"));
  EXPECT_EQ(table.Take(1, "a"), nullptr);
  EXPECT_EQ(table.Take(1, "c"), nullptr);
  EXPECT_EQ(table.Take(1, "b"), first);  // the one pending before is untouched
}

TEST(PendingTable, SameNameOnAnotherSetIsNoDuplicate) {
  PendingTable table;
  auto on_one = Named("x"), on_two = Named("x");
  ASSERT_TRUE(IsOk(table.InsertAll(1, {on_one})));
  ASSERT_TRUE(IsOk(table.InsertAll(2, {on_two})));
  EXPECT_EQ(table.Take(2, "x"), on_two);
  EXPECT_EQ(table.Take(1, "x"), on_one);
}

// Documents current behaviour: duplicates are looked for among the pending requests only, so
// two requests of one name in the same call are accepted and the second is dropped (the
// runtime names a group's parts "name[i]", so it never submits such a batch).
TEST(PendingTable, DuplicateWithinOneInsertionIsRefusedWhole) {
  PendingTable table;
  auto first = Named("twice"), second = Named("twice");
  EXPECT_TRUE(IsStatus(table.InsertAll(5, {first, second}), Code::kDuplicateName,
                       "a request named 'twice' is already pending on process set 5"));
  EXPECT_EQ(table.Take(5, "twice"), nullptr);
}

TEST(PendingTable, TakeSetReturnsEverythingPendingOnTheSetAndForgetsIt) {
  PendingTable table;
  auto a = Named("a"), b = Named("b"), other = Named("a");
  ASSERT_TRUE(IsOk(table.InsertAll(7, {a, b})));
  ASSERT_TRUE(IsOk(table.InsertAll(8, {other})));
  PendingTable::ByName taken = table.TakeSet(7);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken.at("a"), a);
  EXPECT_EQ(taken.at("b"), b);
  EXPECT_EQ(table.sets(), std::vector<int32_t>{8});
  EXPECT_TRUE(table.TakeSet(7).empty());
  EXPECT_EQ(table.Take(8, "a"), other);
}

TEST(PendingTable, SetsListsSetsEmptiedByTakeButNotThoseTakenWhole) {
  PendingTable table;
  EXPECT_TRUE(table.sets().empty());
  ASSERT_TRUE(IsOk(table.InsertAll(4, {Named("a")})));
  ASSERT_TRUE(IsOk(table.InsertAll(2, {Named("b")})));
  EXPECT_EQ(table.sets(), (std::vector<int32_t>{2, 4}));
  ASSERT_NE(table.Take(4, "a"), nullptr);
  EXPECT_EQ(table.sets(), (std::vector<int32_t>{2, 4}));
  table.TakeSet(4);
  EXPECT_EQ(table.sets(), std::vector<int32_t>{2});
  EXPECT_EQ(table.Take(9, "none"), nullptr);  // looking up a set does not add it
  EXPECT_EQ(table.sets(), std::vector<int32_t>{2});
}

TEST(PendingTable, TakenNameCanBeInsertedAgain) {
  PendingTable table;
  ASSERT_TRUE(IsOk(table.InsertAll(0, {Named("step")})));
  ASSERT_NE(table.Take(0, "step"), nullptr);
  auto again = Named("step");
  EXPECT_TRUE(IsOk(table.InsertAll(0, {again})));
  EXPECT_EQ(table.Take(0, "step"), again);
}

}  // namespace
}  // namespace tutti::client
