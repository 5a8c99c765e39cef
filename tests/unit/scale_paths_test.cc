// The coordinator's paths for thousands of ranks (docs/scale.md): frames encoded once and shared,
// Welcomes split into a shared part and each rank's own, cached announcements recorded as bits
// through the slot's hint, and that hint never leading a bit to another tensor once the cache
// gave the slot away.
#include "server/core/frames.h"
#include "server/core/negotiator.h"

#include "proto/cache_bits.h"

#include <gtest/gtest.h>

#include "unit/test_specs.h"

namespace tutti::server {
namespace {

TEST(ScalePaths, AWelcomeSplitIntoSharedAndOwnPartsDecodesAsOneWelcome) {
  wire::Welcome shared;
  for (int r = 0; r < 3; ++r) {
    wire::Peer* peer = shared.add_peers();
    peer->set_rank(r);
    peer->set_host("h" + std::to_string(r));
  }
  shared.set_coordinator_epoch(7);
  shared.set_job_secret(std::string(32, 's'));
  const frames::Welcomes welcomes(shared);
  wire::Welcome own;
  own.set_local_rank(1);
  own.set_local_size(2);
  own.set_cross_rank(0);
  own.set_cross_size(3);
  const Outgoing out = welcomes.To("peer", own);
  wire::Welcome expected = shared;
  expected.MergeFrom(own);
  const wire::Frame frame = frames::Decode(out);
  ASSERT_TRUE(frame.has_welcome());
  EXPECT_EQ(frame.magic(), wire::kMagic);
  EXPECT_EQ(frame.welcome().SerializeAsString(), expected.SerializeAsString());
  // The shared part is one buffer for every rank.
  EXPECT_EQ(welcomes.To("other", wire::Welcome()).frame, out.frame);
}

TEST(ScalePaths, ManyMembersAnnouncingFromTheCacheReleaseOnceWithTheSlot) {
  std::vector<int32_t> members;
  for (int32_t r = 0; r < 130; ++r) members.push_back(r);  // more than one word of bits
  Negotiator n(0, members, 8);
  std::vector<wire::Response> ready;
  for (int32_t r : members) ASSERT_TRUE(n.Announce(r, Spec("g", 4), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  const uint32_t slot = ready[0].cache_slot() - 1;
  ready.clear();
  wire::SetTensors bits;
  wire::EncodeCacheBits({slot}, &bits);
  for (int32_t r : members) {
    EXPECT_EQ(n.AnnounceCachedBits(r, bits, &ready, Clock::now(),
                                   [](uint32_t, const std::string&, const Status& s) {
                                     FAIL() << s.message();
                                   }),
              1u);
    EXPECT_EQ(ready.size(), r + 1 < 130 ? 0u : 1u);
  }
  EXPECT_EQ(ready[0].cache_slot(), slot + 1);
  EXPECT_FALSE(ready[0].has_error());
  // A second bit from a member that already announced is refused by name.
  ready.clear();
  ASSERT_TRUE(n.AnnounceCached(0, slot, &ready).ok());
  Status twice = n.AnnounceCached(0, slot, &ready);
  EXPECT_EQ(twice.code(), Code::kDuplicateName);
}

TEST(ScalePaths, ABitNeverReachesAnotherTensorThroughASlotTheCacheGaveAway) {
  Negotiator n(0, {0, 1, 2}, 1);
  std::vector<wire::Response> ready;
  for (int32_t r : {0, 1, 2}) ASSERT_TRUE(n.Announce(r, Spec("a", 4), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  const uint32_t slot = ready[0].cache_slot() - 1;
  ready.clear();
  // Rank 0 announces 'a' from the cache: the slot's hint leads to 'a''s entry, which waits.
  ASSERT_TRUE(n.AnnounceCached(0, slot, &ready).ok());
  // 'c' finds the cache full: it evicts 'a''s slot and runs uncached; once every member heard of
  // the eviction, the slot is free, and 'b' takes it.
  for (int32_t r : {0, 1, 2}) ASSERT_TRUE(n.Announce(r, Spec("c", 1), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].cache_slot(), 0u);
  EXPECT_EQ(n.cache().TakeEvicted(), std::vector<uint32_t>{slot});
  for (int32_t r : {0, 1, 2}) n.AcknowledgeEvictions(r, 1);
  ready.clear();
  for (int32_t r : {0, 1, 2}) ASSERT_TRUE(n.Announce(r, Spec("b", 2), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  ASSERT_EQ(ready[0].cache_slot(), slot + 1);
  ready.clear();
  // Rank 2's bit for the slot means 'b' now: it must open 'b', not count for 'a'.
  wire::SetTensors bits;
  wire::EncodeCacheBits({slot}, &bits);
  n.AnnounceCachedBits(2, bits, &ready, Clock::now(),
                       [](uint32_t, const std::string&, const Status& s) { FAIL() << s.message(); });
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(n.pending_count(), 2u);  // 'a' waits for ranks 1 and 2, 'b' for ranks 0 and 1
}

}  // namespace
}  // namespace tutti::server
