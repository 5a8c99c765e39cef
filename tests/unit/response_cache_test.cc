// The coordinator's response cache: slots, expansion of bits, eviction and safe reuse; and the
// negotiator's use of it and its stall inspection.
#include "server/core/negotiator.h"
#include "server/core/response_cache.h"

#include <gtest/gtest.h>

#include "unit/test_specs.h"

namespace tutti::server {
namespace {

TEST(ResponseCache, AssignsExpandsAndKeepsTheSlotOfAName) {
  ResponseCache cache(2, 4);
  const auto a = Spec("a", 4);
  const uint32_t slot = cache.Assign({&a, &a});
  ASSERT_EQ(slot, 0u);
  EXPECT_EQ(cache.Assign({&a, &a}), slot);
  ASSERT_NE(cache.Expand(1, slot), nullptr);
  EXPECT_EQ(cache.Expand(1, slot)->shape(0), 4);
  EXPECT_EQ(cache.Expand(0, 3), nullptr);  // never assigned
}

TEST(ResponseCache, AChangedSpecEvictsButOldBitsStillMeanTheOldTensorUntilEveryoneAcknowledged) {
  ResponseCache cache(2, 1);
  const auto a = Spec("a", 4);
  const uint32_t slot = cache.Assign({&a, &a});
  cache.Observe(0, Spec("a", 4));  // unchanged: nothing happens
  EXPECT_TRUE(cache.TakeEvicted().empty());
  cache.Observe(1, Spec("a", 8));  // rank 1 changed its shape
  EXPECT_EQ(cache.TakeEvicted(), std::vector<uint32_t>{slot});
  // Member 0 may have sent its bit before hearing of the eviction: it still expands to [4].
  ASSERT_NE(cache.Expand(0, slot), nullptr);
  EXPECT_EQ(cache.Expand(0, slot)->shape(0), 4);
  // Capacity 1 and the only slot retiring: a new tensor goes uncached.
  const auto b = Spec("b", 2);
  EXPECT_EQ(cache.Assign({&b, &b}), ResponseCache::kNone);
  cache.Acknowledge(0, 1);
  EXPECT_EQ(cache.Assign({&b, &b}), ResponseCache::kNone);  // member 1 has not acknowledged
  cache.Acknowledge(1, 1);
  EXPECT_EQ(cache.Expand(0, slot), nullptr);  // free now
  EXPECT_EQ(cache.Assign({&b, &b}), slot);    // and reusable
}

TEST(ResponseCache, AFullCacheEvictsTheLeastRecentlyUsedSlot) {
  ResponseCache cache(1, 2);
  const auto a = Spec("a", 1), b = Spec("b", 1), c = Spec("c", 1);
  const uint32_t sa = cache.Assign({&a}), sb = cache.Assign({&b});
  ASSERT_NE(cache.Expand(0, sa), nullptr);  // a used after b: b is least recent
  EXPECT_EQ(cache.Assign({&c}), ResponseCache::kNone);
  EXPECT_EQ(cache.TakeEvicted(), std::vector<uint32_t>{sb});
  cache.Acknowledge(0, 1);
  EXPECT_EQ(cache.Assign({&c}), sb);
}

TEST(ResponseCache, AcknowledgementsBeyondWhatWasToldAreIgnored) {
  ResponseCache cache(2, 1);
  const auto a = Spec("a", 1);
  const uint32_t slot = cache.Assign({&a, &a});
  cache.Observe(0, Spec("a", 2));
  // Not yet told (TakeEvicted not called): a bogus acknowledgement must not free the slot.
  cache.Acknowledge(0, 5);
  cache.Acknowledge(1, 5);
  EXPECT_NE(cache.Expand(1, slot), nullptr);
}

TEST(ResponseCache, DisabledWithZeroCapacity) {
  ResponseCache cache(1, 0);
  const auto a = Spec("a", 1);
  EXPECT_EQ(cache.Assign({&a}), ResponseCache::kNone);
}

TEST(NegotiatorCache, CachedAnnouncementsNegotiateLikeFullOnes) {
  Negotiator n(0, {0, 1}, 8);
  std::vector<wire::Response> ready;
  ASSERT_TRUE(n.Announce(0, Spec("g", 4), &ready).ok());
  ASSERT_TRUE(n.Announce(1, Spec("g", 4), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  const uint32_t slot = ready[0].cache_slot();
  ASSERT_GT(slot, 0u);
  ready.clear();
  ASSERT_TRUE(n.AnnounceCached(0, slot - 1, &ready).ok());
  // Rank 1 changed the tensor: the bit of rank 0 and the full spec of rank 1 disagree.
  ASSERT_TRUE(n.Announce(1, Spec("g", 8), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].error().message(),
            "mismatched 'g' on process set 0: rank 0 sent allreduce float32[4] op=sum, rank 1 "
            "sent allreduce float32[8] op=sum");
  EXPECT_EQ(n.cache().TakeEvicted(), std::vector<uint32_t>{slot - 1});
  Status unknown = n.AnnounceCached(0, 7, &ready);
  EXPECT_EQ(unknown.message(),
            "rank 0 announced response-cache slot 7 of process set 0, which holds no tensor of it");
}

TEST(NegotiatorStalls, WarnOnceThenFailNamingTheMissingRanks) {
  using std::chrono::seconds;
  Negotiator n(3, {0, 1, 2});
  std::vector<wire::Response> ready;
  const auto t0 = Clock::now();
  ASSERT_TRUE(n.Announce(0, Spec("x", 1), &ready, t0).ok());
  ASSERT_TRUE(n.Announce(2, Spec("x", 1), &ready, t0).ok());
  EXPECT_EQ(n.NextInspection(seconds(60), seconds(0)), t0 + seconds(60));
  std::vector<Negotiator::Stall> warned, stalled;
  std::vector<wire::Response> failed;
  n.Inspect(t0 + seconds(59), seconds(60), seconds(120), &warned, &stalled, &failed);
  EXPECT_TRUE(warned.empty());
  n.Inspect(t0 + seconds(61), seconds(60), seconds(120), &warned, &stalled, &failed);
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_EQ(warned[0].name, "x");
  EXPECT_EQ(warned[0].missing, std::vector<int32_t>{1});
  EXPECT_EQ(warned[0].submitted, (std::vector<int32_t>{0, 2}));
  warned.clear();
  n.Inspect(t0 + seconds(62), seconds(60), seconds(120), &warned, &stalled, &failed);
  EXPECT_TRUE(warned.empty());  // once
  EXPECT_EQ(n.NextInspection(seconds(60), seconds(120)), t0 + seconds(120));
  n.Inspect(t0 + seconds(121), seconds(60), seconds(120), &warned, &stalled, &failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].error().code(), static_cast<int32_t>(Code::kStalled));
  EXPECT_EQ(failed[0].error().message(),
            "stalled: 'x' on process set 3 waited 120 s for ranks [1], which never submitted it");
  EXPECT_EQ(n.NextInspection(seconds(60), seconds(120)), std::nullopt);
}

}  // namespace
}  // namespace tutti::server
