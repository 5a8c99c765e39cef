// Ranks added to a running elastic job, on the wire against a real tuttid (docs/elastic.md,
// "Adding ranks"): raw clients play the ranks, so that each frame of the protocol is seen and
// the order of the boundary is chosen on purpose.
#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/raw_client.h"

namespace tutti::testing {
namespace {

wire::Frame ElasticRegister(const std::string& job, int32_t rank, int32_t size) {
  wire::Frame frame = Register(rank, size);
  frame.mutable_register_()->set_job(job);
  frame.mutable_register_()->set_elastic(true);
  frame.mutable_register_()->set_min_size(1);
  frame.mutable_register_()->set_data_endpoint("127.0.0.1:" + std::to_string(40000 + rank));
  return frame;
}

// The next frame `client` receives that is not an Execute, or a default frame.
wire::Frame Next(RawClient& client) {
  wire::Frame frame;
  while (client.Receive(&frame))
    if (!frame.has_execute()) return frame;
  return {};
}

void AtBoundary(RawClient& client, uint64_t membership_epoch) {
  wire::Frame frame;
  frame.mutable_at_boundary();
  frame.set_membership_epoch(membership_epoch);
  client.Send(Encoded(frame));
}

// Returns once tuttid handled everything `client` sent before (its answers come in order).
void Handled(RawClient& client) {
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(99);
  client.Send(Encoded(query));
  wire::Frame frame;
  while (client.Receive(&frame) && !frame.has_coordinator_counters()) {
  }
  ASSERT_TRUE(frame.has_coordinator_counters());
}

TEST(Growth, AnAddedRankIsAdmittedOnceEveryRankIsAtABoundary) {
  Tuttid tuttid;
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint()), joiner(tuttid.endpoint());
  rank0.Send(Encoded(ElasticRegister("grow", 0, 2)));
  rank1.Send(Encoded(ElasticRegister("grow", 1, 2)));
  ASSERT_TRUE(Next(rank0).has_welcome());
  ASSERT_TRUE(Next(rank1).has_welcome());

  joiner.Send(Encoded(ElasticRegister("grow", 7, 2)));  // a launcher's number, not a slot
  for (RawClient* rank : {&rank0, &rank1}) {
    wire::Frame waiting = Next(*rank);
    ASSERT_TRUE(waiting.has_ranks_waiting());
    EXPECT_EQ(waiting.ranks_waiting().count(), 1);
  }
  AtBoundary(rank0, 1);
  AtBoundary(rank1, 0);  // an earlier epoch's boundary is no boundary of this one
  joiner.SetReceiveTimeout(300);
  wire::Frame early;
  EXPECT_FALSE(joiner.Receive(&early)) << early.DebugString();
  AtBoundary(rank1, 1);

  joiner.SetReceiveTimeout(10000);
  wire::Frame welcome = Next(joiner);
  ASSERT_TRUE(welcome.has_welcome()) << welcome.DebugString();
  EXPECT_EQ(welcome.welcome().slot(), 2);
  EXPECT_EQ(welcome.welcome().membership_epoch(), 2u);
  EXPECT_EQ(std::vector<int32_t>(welcome.welcome().members().begin(),
                                 welcome.welcome().members().end()),
            (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(welcome.welcome().peers_size(), 3);
  EXPECT_EQ(welcome.welcome().peers(1).data_endpoint(), "127.0.0.1:40001");
  for (RawClient* rank : {&rank0, &rank1}) {
    wire::Frame frame = Next(*rank);
    ASSERT_TRUE(frame.has_reformed()) << frame.DebugString();
    const wire::Reformed& reformed = frame.reformed();
    EXPECT_EQ(reformed.membership_epoch(), 2u);
    EXPECT_EQ(reformed.lost_size(), 0);
    ASSERT_EQ(reformed.added_size(), 1);
    EXPECT_EQ(reformed.added(0).rank(), 2);
    EXPECT_EQ(reformed.added(0).data_endpoint(), "127.0.0.1:40007");
    EXPECT_EQ(std::vector<int32_t>(reformed.reformed_sets().begin(), reformed.reformed_sets().end()),
              (std::vector<int32_t>{0}));
    EXPECT_FALSE(reformed.orderly());  // the old world lane is idle: aborted and joined
    EXPECT_EQ(reformed.error().message(),
              "re-formed: 1 rank added; job 'grow' goes on with 3 ranks in membership epoch 2");
  }
  // tuttid names ranks as the ranks number them: after slot 0 leaves, slot 2 is rank 1.
  wire::Frame bye;
  bye.mutable_bye();
  rank0.Send(Encoded(bye));
  wire::Frame first = Next(rank1);
  ASSERT_TRUE(first.has_reformed()) << first.DebugString();
  EXPECT_EQ(first.reformed().error().message(),
            "re-formed: peer lost: rank 0 finalized; job 'grow' goes on with 2 ranks in "
            "membership epoch 3");
  joiner.Send(Encoded(bye));
  wire::Frame second = Next(rank1);
  ASSERT_TRUE(second.has_reformed()) << second.DebugString();
  EXPECT_EQ(second.reformed().error().message(),
            "re-formed: peer lost: rank 1 finalized; job 'grow' goes on with 1 ranks in "
            "membership epoch 4");
}

// Rank 0 waits at its boundary; rank 1 announces on the world instead (its state belongs to
// another set, say): waiting for rank 1's boundary would wait for ever, since rank 0 takes no
// part in that collective. tuttid admits at once, whichever of the two frames comes last, and
// rank 1's announcement fails as one of the epoch that ended.
void WorldAnnouncementWhileAnotherWaits(bool announce_first) {
  const std::string job = announce_first ? "announce-first" : "boundary-first";
  Tuttid tuttid;
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint()), joiner(tuttid.endpoint());
  rank0.Send(Encoded(ElasticRegister(job, 0, 2)));
  rank1.Send(Encoded(ElasticRegister(job, 1, 2)));
  ASSERT_TRUE(Next(rank0).has_welcome());
  ASSERT_TRUE(Next(rank1).has_welcome());
  joiner.Send(Encoded(ElasticRegister(job, 2, 2)));
  ASSERT_TRUE(Next(rank0).has_ranks_waiting());
  ASSERT_TRUE(Next(rank1).has_ranks_waiting());
  const wire::Frame announce = AllreduceAnnounce("grad", /*membership_epoch=*/1);
  // Frames of two connections reach tuttid in no set order: a counters query answered on the
  // same connection says the first frame was handled before the second is sent.
  if (announce_first) {
    rank1.Send(Encoded(announce));
    Handled(rank1);
    AtBoundary(rank0, 1);
  } else {
    AtBoundary(rank0, 1);
    Handled(rank0);
    rank1.Send(Encoded(announce));
  }
  ASSERT_TRUE(Next(joiner).has_welcome());
  ASSERT_TRUE(Next(rank0).has_reformed());
  if (announce_first) {
    // Pending when the job re-formed: failed in the world's last Execute of epoch 1, before the
    // Reformed that marks the change.
    wire::Frame execute;
    ASSERT_TRUE(rank1.Receive(&execute));
    ASSERT_TRUE(execute.has_execute()) << execute.DebugString();
    ASSERT_EQ(execute.execute().responses_size(), 1);
    EXPECT_EQ(execute.execute().responses(0).error().code(), -20);
    EXPECT_EQ(execute.execute().responses(0).error().message(),
              "re-formed: 1 rank added; job '" + job +
                  "' goes on with 3 ranks in membership epoch 2 while 'grad' was pending");
  }
  wire::Frame reformed = Next(rank1);
  ASSERT_TRUE(reformed.has_reformed()) << reformed.DebugString();
  EXPECT_EQ(reformed.reformed().membership_epoch(), 2u);
  if (announce_first) return;
  // Sent in epoch 1, handled in epoch 2: rank 1 failed 'grad' itself at the mark, so tuttid drops
  // the announcement (and counts it) instead of refusing it. The next frame rank 1 gets is the
  // answer to its counters query.
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(7);
  query.mutable_counters_query()->set_set_id(0);
  query.set_membership_epoch(2);
  rank1.Send(Encoded(query));
  wire::Frame counters = Next(rank1);
  ASSERT_TRUE(counters.has_coordinator_counters()) << counters.DebugString();
  EXPECT_EQ(counters.coordinator_counters().set().announcements_dropped(), 1u);
}

TEST(Growth, AWorldAnnouncementOfARankNotAtItsBoundaryAdmitsAtOnce) {
  WorldAnnouncementWhileAnotherWaits(/*announce_first=*/false);
}

TEST(Growth, ABoundaryWhileAnotherRankWaitsOnTheWorldAdmitsAtOnce) {
  WorldAnnouncementWhileAnotherWaits(/*announce_first=*/true);
}

TEST(Growth, ARankThatAsksBeforeTheRendezvousCompletedIsAddedAfterIt) {
  Tuttid tuttid;
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint()), joiner(tuttid.endpoint());
  joiner.Send(Encoded(ElasticRegister("early", 2, 2)));
  rank0.Send(Encoded(ElasticRegister("early", 0, 2)));
  rank1.Send(Encoded(ElasticRegister("early", 1, 2)));
  for (RawClient* rank : {&rank0, &rank1}) {
    ASSERT_TRUE(Next(*rank).has_welcome());
    wire::Frame waiting = Next(*rank);
    ASSERT_TRUE(waiting.has_ranks_waiting()) << waiting.DebugString();
    EXPECT_EQ(waiting.ranks_waiting().count(), 1);
    AtBoundary(*rank, 1);
  }
  wire::Frame welcome = Next(joiner);
  ASSERT_TRUE(welcome.has_welcome()) << welcome.DebugString();
  EXPECT_EQ(welcome.welcome().slot(), 2);
}

TEST(Growth, ALiveRanksNumberCannotBeClaimedAgain) {
  Tuttid tuttid;
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint()), twin(tuttid.endpoint());
  rank0.Send(Encoded(ElasticRegister("twin", 0, 2)));
  rank1.Send(Encoded(ElasticRegister("twin", 1, 2)));
  ASSERT_TRUE(Next(rank0).has_welcome());
  twin.Send(Encoded(ElasticRegister("twin", 1, 2)));
  EXPECT_EQ(twin.Refusal(), "-1 rank 1 of job 'twin' is already registered");
}

TEST(Growth, ARankOfAJobThatIsNotElasticIsRefusedAboveTheSize) {
  Tuttid tuttid;
  RawClient joiner(tuttid.endpoint());
  wire::Frame frame = ElasticRegister("plain", 2, 2);
  frame.mutable_register_()->set_elastic(false);
  joiner.Send(Encoded(frame));
  EXPECT_EQ(joiner.Refusal(), "-1 register: rank 2 outside [0, 2)");
}

}  // namespace
}  // namespace tutti::testing
