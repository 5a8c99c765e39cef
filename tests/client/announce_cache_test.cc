// AnnounceCache (client/control/announce_cache.h), the rank's half of the response cache
// (docs/response-cache.md): what Drain puts into an Announce (full specs, then one bit per
// tensor whose slot the coordinator assigned and whose spec is unchanged, in a bitmap from a
// byte-aligned base), how Apply of hand-built Execute frames assigns slots, fills in the names
// of cache references (responses and fused tensors) and applies evictions, the error for a
// reference to a slot never assigned, and Forget and DropSet.
#include "client/control/announce_cache.h"

#include <gtest/gtest.h>

#include <string>

#include "client/client_test_support.h"
#include "unit/test_specs.h"

namespace tutti::client {
namespace {

using tutti::server::Spec;
using namespace tutti::testing;

constexpr int32_t kSet = 1;

// A response assigning cache slot `slot` to `spec` (cache_slot is 1 + the slot).
wire::Response Assigning(const wire::TensorSpec& spec, uint32_t slot) {
  wire::Response response;
  *response.mutable_spec() = spec;
  response.set_cache_slot(slot + 1);
  return response;
}

// A response naming its tensor by the slot every member knows.
wire::Response Referring(uint32_t slot) {
  wire::Response response;
  response.set_cache_slot(slot + 1);
  return response;
}

wire::Execute ExecuteOf(int32_t set_id, std::vector<wire::Response> responses,
                        std::vector<uint32_t> evicted = {}) {
  wire::Execute execute;
  execute.set_set_id(set_id);
  for (auto& response : responses) *execute.add_responses() = std::move(response);
  for (uint32_t slot : evicted) execute.add_cache_evicted(slot);
  return execute;
}

// Drains `cache`, expecting `full` specs and `cached` bits in the Announce it returns.
wire::Announce Drained(AnnounceCache& cache, size_t full, size_t cached) {
  wire::Announce announce;
  const auto drained = cache.Drain(&announce);
  EXPECT_EQ(drained.full, full);
  EXPECT_EQ(drained.cached, cached);
  EXPECT_TRUE(cache.empty());
  return announce;
}

// Announces `spec`, then applies an Execute that assigns it `slot`.
void Cached(AnnounceCache& cache, const wire::TensorSpec& spec, uint32_t slot,
            int32_t set_id = kSet) {
  cache.Add(set_id, spec);
  Drained(cache, 1, 0);
  wire::Execute execute = ExecuteOf(set_id, {Assigning(spec, slot)});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
}

TEST(AnnounceCache, FirstAnnouncementIsTheFullSpec) {
  AnnounceCache cache;
  EXPECT_TRUE(cache.empty());
  cache.Add(kSet, Spec("w", 4));
  EXPECT_FALSE(cache.empty());
  const wire::Announce announce = Drained(cache, 1, 0);
  ASSERT_EQ(announce.sets_size(), 1);
  const wire::SetTensors& set = announce.sets(0);
  EXPECT_EQ(set.set_id(), kSet);
  EXPECT_EQ(set.evictions_seen(), 0u);
  ASSERT_EQ(set.tensors_size(), 1);
  EXPECT_EQ(set.tensors(0).SerializeAsString(), Spec("w", 4).SerializeAsString());
  EXPECT_TRUE(set.cached().empty());
}

TEST(AnnounceCache, DrainWithNothingQueuedAddsNoSet) {
  AnnounceCache cache;
  EXPECT_EQ(Drained(cache, 0, 0).sets_size(), 0);
}

TEST(AnnounceCache, AnnouncementBeforeAnySlotWasAssignedIsFullAgain) {
  AnnounceCache cache;
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
  cache.Add(kSet, Spec("w", 4));
  const wire::Announce second = Drained(cache, 1, 0);
  ASSERT_EQ(second.sets_size(), 1);
  EXPECT_EQ(second.sets(0).tensors_size(), 1);
}

TEST(AnnounceCache, SecondAnnouncementOfAnUnchangedSpecIsOneBit) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 2);
  cache.Add(kSet, Spec("w", 4));
  const wire::Announce announce = Drained(cache, 0, 1);
  ASSERT_EQ(announce.sets_size(), 1);
  const wire::SetTensors& set = announce.sets(0);
  EXPECT_EQ(set.tensors_size(), 0);
  EXPECT_EQ(set.cached_base(), 0u);
  EXPECT_EQ(set.cached(), std::string(1, '\x04'));  // bit 2 of byte 0: slot 2
}

TEST(AnnounceCache, BitsFormABitmapFromTheByteBelowTheLowestSlot) {
  AnnounceCache cache;
  Cached(cache, Spec("a", 1), 9);
  Cached(cache, Spec("b", 2), 17);
  Cached(cache, Spec("c", 3), 10);
  cache.Add(kSet, Spec("b", 2));
  cache.Add(kSet, Spec("a", 1));
  cache.Add(kSet, Spec("c", 3));
  const wire::Announce announce = Drained(cache, 0, 3);
  ASSERT_EQ(announce.sets_size(), 1);
  EXPECT_EQ(announce.sets(0).cached_base(), 8u);
  // Slots 9 and 10: bits 1 and 2 of byte 0; slot 17: bit 1 of byte 1.
  EXPECT_EQ(announce.sets(0).cached(), std::string("\x06\x02", 2));
}

TEST(AnnounceCache, ChangedSpecIsAnnouncedInFull) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0);
  cache.Add(kSet, Spec("w", 8));
  const wire::Announce announce = Drained(cache, 1, 0);
  ASSERT_EQ(announce.sets_size(), 1);
  ASSERT_EQ(announce.sets(0).tensors_size(), 1);
  EXPECT_EQ(announce.sets(0).tensors(0).shape(0), 8);
  EXPECT_TRUE(announce.sets(0).cached().empty());
}

// tuttid evicts a changed tensor's old slot in the Execute that assigns its new one: from then on
// the tensor is announced as the new slot's bit, not in full for ever.
TEST(AnnounceCache, ChangedSpecIsCachedInItsNewSlotWhenTheOldIsEvictedWithTheAssignment) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0);
  cache.Add(kSet, Spec("w", 8));
  Drained(cache, 1, 0);
  wire::Execute execute = ExecuteOf(kSet, {Assigning(Spec("w", 8), 1)}, {0});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  cache.Add(kSet, Spec("w", 8));
  const wire::Announce announce = Drained(cache, 0, 1);
  EXPECT_EQ(announce.sets(0).cached(), std::string("\x02", 1));  // slot 1: bit 1 of byte 0
  EXPECT_EQ(cache.Lookup(kSet, Spec("w", 8)), std::optional<uint32_t>(1));
}

TEST(AnnounceCache, FullAndCachedTensorsOfOneSetShareItsEntry) {
  AnnounceCache cache;
  Cached(cache, Spec("old", 4), 0);
  cache.Add(kSet, Spec("old", 4));
  cache.Add(kSet, Spec("new", 4));
  const wire::Announce announce = Drained(cache, 1, 1);
  ASSERT_EQ(announce.sets_size(), 1);
  ASSERT_EQ(announce.sets(0).tensors_size(), 1);
  EXPECT_EQ(announce.sets(0).tensors(0).name(), "new");
  EXPECT_EQ(announce.sets(0).cached(), std::string(1, '\x01'));
}

TEST(AnnounceCache, SetsAreDrainedEachIntoItsOwnEntry) {
  AnnounceCache cache;
  cache.Add(2, Spec("x", 1));
  cache.Add(0, Spec("x", 1));
  const wire::Announce announce = Drained(cache, 2, 0);
  ASSERT_EQ(announce.sets_size(), 2);
  EXPECT_EQ(announce.sets(0).set_id(), 0);
  EXPECT_EQ(announce.sets(1).set_id(), 2);
}

TEST(AnnounceCache, SlotIsPerSet) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0, /*set_id=*/1);
  cache.Add(2, Spec("w", 4));
  Drained(cache, 1, 0);
}

TEST(AnnounceCache, ReferenceToAnAssignedSlotIsGivenTheTensorsName) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 3);
  wire::Execute execute = ExecuteOf(kSet, {Referring(3)});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  ASSERT_EQ(execute.responses_size(), 1);
  EXPECT_EQ(execute.responses(0).spec().name(), "w");
}

TEST(AnnounceCache, FusedReferencesAreGivenTheirNames) {
  AnnounceCache cache;
  Cached(cache, Spec("a", 4), 0);
  Cached(cache, Spec("b", 4), 1);
  wire::Response fused = Referring(0);
  fused.add_fused()->set_cache_slot(2);  // slot 1
  auto* full = fused.add_fused();        // named, assigned slot 5 now
  full->set_name("c");
  full->set_cache_slot(6);
  wire::Execute execute = ExecuteOf(kSet, {fused});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  const wire::Response& applied = execute.responses(0);
  EXPECT_EQ(applied.spec().name(), "a");
  EXPECT_EQ(applied.fused(0).name(), "b");
  EXPECT_EQ(applied.fused(1).name(), "c");
  // "c" was never announced by this rank: its slot holds no spec, so it is announced in full.
  cache.Add(kSet, Spec("c", 4));
  Drained(cache, 1, 0);
}

TEST(AnnounceCache, ReferenceToASlotNeverAssignedIsAnError) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0);
  wire::Execute execute = ExecuteOf(kSet, {Referring(6)});
  EXPECT_TRUE(IsStatus(cache.Apply(&execute), Code::kInternal,
                       "the coordinator referred to response-cache slot 6 of process set 1, which "
                       "this rank does not hold"));
  wire::Execute fused = ExecuteOf(kSet, {Referring(0)});
  fused.mutable_responses(0)->add_fused()->set_cache_slot(2);  // slot 1: never assigned
  EXPECT_TRUE(IsStatus(cache.Apply(&fused), Code::kInternal,
                       "the coordinator referred to response-cache slot 1 of process set 1, which "
                       "this rank does not hold"));
}

TEST(AnnounceCache, ErrorResponseWithoutSlotOrSpecIsNoReference) {
  AnnounceCache cache;
  wire::Response error;
  error.mutable_error()->set_code(static_cast<int>(Code::kMismatch));
  wire::Execute execute = ExecuteOf(kSet, {error});
  EXPECT_TRUE(IsOk(cache.Apply(&execute)));
  EXPECT_EQ(execute.responses(0).spec().name(), "");
}

TEST(AnnounceCache, FullResponseWithoutSlotAssignsNothing) {
  AnnounceCache cache;
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
  wire::Response uncached;
  *uncached.mutable_spec() = Spec("w", 4);
  wire::Execute execute = ExecuteOf(kSet, {uncached});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
}

TEST(AnnounceCache, EvictedSlotIsAnnouncedInFullAndCountedAsSeen) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 2);
  Cached(cache, Spec("v", 4), 3);
  wire::Execute eviction = ExecuteOf(kSet, {}, {2, 40});  // 40: never held here, still counted
  ASSERT_TRUE(IsOk(cache.Apply(&eviction)));
  cache.Add(kSet, Spec("w", 4));
  cache.Add(kSet, Spec("v", 4));
  const wire::Announce announce = Drained(cache, 1, 1);
  ASSERT_EQ(announce.sets_size(), 1);
  EXPECT_EQ(announce.sets(0).evictions_seen(), 2u);
  ASSERT_EQ(announce.sets(0).tensors_size(), 1);
  EXPECT_EQ(announce.sets(0).tensors(0).name(), "w");
  // A reference to the evicted slot is now an error.
  wire::Execute stale = ExecuteOf(kSet, {Referring(2)});
  EXPECT_EQ(cache.Apply(&stale).code(), Code::kInternal);
}

TEST(AnnounceCache, EvictionsApplyAfterTheResponsesOfTheSameExecute) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0);
  wire::Execute execute = ExecuteOf(kSet, {Referring(0)}, {0});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  EXPECT_EQ(execute.responses(0).spec().name(), "w");
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
}

TEST(AnnounceCache, ForgottenTensorAssignedLaterHoldsNoSpecAndIsAnnouncedInFull) {
  AnnounceCache cache;
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
  cache.Forget(kSet, "w");
  wire::Execute execute = ExecuteOf(kSet, {Assigning(Spec("w", 4), 0)});
  ASSERT_TRUE(IsOk(cache.Apply(&execute)));
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
}

TEST(AnnounceCache, SlotWithoutSpecLearnsItWhenReferencedAfterAFullAnnouncement) {
  AnnounceCache cache;
  // Assigned while this rank had joined and announced nothing: no spec of its own.
  wire::Execute joined = ExecuteOf(kSet, {Assigning(Spec("w", 4), 1)});
  ASSERT_TRUE(IsOk(cache.Apply(&joined)));
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 1, 0);
  wire::Execute referred = ExecuteOf(kSet, {Referring(1)});
  ASSERT_TRUE(IsOk(cache.Apply(&referred)));
  EXPECT_EQ(referred.responses(0).spec().name(), "w");
  cache.Add(kSet, Spec("w", 4));
  Drained(cache, 0, 1);
}

TEST(AnnounceCache, DroppedSetForgetsItsSlots) {
  AnnounceCache cache;
  Cached(cache, Spec("w", 4), 0);
  Cached(cache, Spec("w", 4), 0, /*set_id=*/2);
  cache.DropSet(kSet);
  cache.Add(kSet, Spec("w", 4));
  cache.Add(2, Spec("w", 4));
  Drained(cache, 1, 1);  // set 1 starts afresh, set 2 kept its slot
  wire::Execute stale = ExecuteOf(kSet, {Referring(0)});
  EXPECT_TRUE(IsStatus(cache.Apply(&stale), Code::kInternal,
                       "the coordinator referred to response-cache slot 0 of process set 1, which "
                       "this rank does not hold"));
}

}  // namespace
}  // namespace tutti::client
