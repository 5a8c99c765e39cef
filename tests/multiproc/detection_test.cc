// Fast detection's report path against a real tuttid (docs/elastic.md, "Detection"): a rank
// reports its data-plane connection to a peer closed; tuttid probes the peer. Raw clients play
// both ranks, so that the peer can answer the probe, or not, on purpose.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "multiproc/cluster.h"
#include "multiproc/raw_client.h"

namespace tutti::testing {
namespace {

void JoinAsPair(RawClient& rank0, RawClient& rank1, const std::string& job) {
  for (int32_t r = 0; r < 2; ++r) {
    wire::Frame registration = Register(r, 2);
    registration.mutable_register_()->set_job(job);
    (r == 0 ? rank0 : rank1).Send(Encoded(registration));
  }
  ASSERT_EQ(rank0.Refusal(), "not a refusal");  // the Welcomes
  ASSERT_EQ(rank1.Refusal(), "not a refusal");
}

void Announce(RawClient& client, const std::string& name) {
  client.Send(Encoded(AllreduceAnnounce(name)));
}

void Report(RawClient& client, int32_t rank, int32_t set_id, uint64_t incarnation_epoch = 0,
            bool integrity_failure = false) {
  wire::Frame frame;
  if (integrity_failure) frame.mutable_peer_report()->set_integrity_failure(true);
  frame.mutable_peer_report()->set_rank(rank);
  frame.mutable_peer_report()->set_set_id(set_id);
  if (incarnation_epoch != 0) frame.mutable_peer_report()->set_incarnation_epoch(incarnation_epoch);
  client.Send(Encoded(frame));
}

// The next Fault `client` receives (Executes before it are skipped), or none.
std::optional<wire::Fault> NextFault(RawClient& client) {
  wire::Frame frame;
  while (client.Receive(&frame))
    if (frame.has_fault()) return frame.fault();
  return std::nullopt;
}

TEST(Detection, AReportedPeerThatAnswersTheProbeBreaksOnlyTheReportersSet) {
  // A long probe timeout: the answer must win however loaded the machine is.
  Tuttid tuttid({"--probe-timeout-ms", "60000"});
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint());
  JoinAsPair(rank0, rank1, "answers");
  Announce(rank0, "t");
  Report(rank0, 1, 0);
  wire::Frame probe;
  ASSERT_TRUE(rank1.Receive(&probe));
  ASSERT_TRUE(probe.has_probe());
  rank1.Send(Encoded(probe));  // the echo
  wire::Frame execute;
  ASSERT_TRUE(rank0.Receive(&execute));
  ASSERT_TRUE(execute.has_execute());
  ASSERT_EQ(execute.execute().responses_size(), 1);
  EXPECT_EQ(execute.execute().responses(0).error().code(), -6);
  EXPECT_EQ(execute.execute().responses(0).error().message(),
            "peer lost: data-plane connection to rank 1 lost while 't' was pending");
  for (RawClient* member : {&rank0, &rank1}) {
    auto fault = NextFault(*member);
    ASSERT_TRUE(fault);
    EXPECT_EQ(fault->lost_ranks_size(), 0);  // nobody is evicted
    ASSERT_EQ(fault->broken_sets_size(), 1);
    EXPECT_EQ(fault->broken_sets(0), 0);
    EXPECT_EQ(fault->error().message(), "peer lost: data-plane connection to rank 1 lost");
  }
}

// A record that failed authentication (TUTTI_DATA_SECURITY, docs/security.md): the path between
// the two was tampered with. The set fails at once on every member, with the reason; nobody is
// probed (the peer would answer) or evicted.
TEST(Detection, AnIntegrityReportBreaksTheSetAtOnceOnEveryMember) {
  Tuttid tuttid({"--probe-timeout-ms", "60000"});
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint());
  JoinAsPair(rank0, rank1, "tampered");
  Announce(rank0, "t");
  // Frames of two connections reach tuttid in any order: a query answered on rank 0's own
  // connection proves the announcement is in before rank 1 reports.
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(1);
  rank0.Send(Encoded(query));
  wire::Frame counters;
  ASSERT_TRUE(rank0.Receive(&counters));
  ASSERT_TRUE(counters.has_coordinator_counters());
  Report(rank1, 0, 0, 0, /*integrity_failure=*/true);
  const std::string why =
      "data-plane integrity: rank 1 received a record from rank 0 on process set 0 that failed "
      "authentication (altered, replayed, reordered or dropped on the way); the set fails";
  wire::Frame execute;
  ASSERT_TRUE(rank0.Receive(&execute));
  ASSERT_TRUE(execute.has_execute()) << "rank 0 got frame body " << execute.body_case();
  ASSERT_EQ(execute.execute().responses_size(), 1);
  EXPECT_EQ(execute.execute().responses(0).error().code(), -12);
  EXPECT_EQ(execute.execute().responses(0).error().message(), why + " while 't' was pending");
  for (RawClient* member : {&rank0, &rank1}) {
    auto fault = NextFault(*member);
    ASSERT_TRUE(fault);
    EXPECT_EQ(fault->lost_ranks_size(), 0);
    ASSERT_EQ(fault->broken_sets_size(), 1);
    EXPECT_EQ(fault->broken_sets(0), 0);
    EXPECT_EQ(fault->error().code(), -12);
    EXPECT_EQ(fault->error().message(), why);
  }
}

TEST(Detection, AReportedPeerThatDoesNotAnswerIsLostAndEvicted) {
  Tuttid tuttid;  // the default probe timeout, 50 ms
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint());
  JoinAsPair(rank0, rank1, "silent");
  Report(rank0, 1, 0);  // rank 1 never reads, let alone answers
  auto fault = NextFault(rank0);
  ASSERT_TRUE(fault);
  ASSERT_EQ(fault->lost_ranks_size(), 1);
  EXPECT_EQ(fault->lost_ranks(0), 1);
  const std::string why =
      "its data-plane connection to rank 0 closed and it did not answer a probe within 50 ms";
  EXPECT_EQ(fault->error().message(), "peer lost: rank 1: " + why);
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  rank1.Send(Encoded(heartbeat));
  wire::Frame refusal;
  do {
    ASSERT_TRUE(rank1.Receive(&refusal));
  } while (!refusal.has_refusal());
  EXPECT_EQ(refusal.refusal().error().code(), -17);
  EXPECT_EQ(refusal.refusal().error().message(),
            "evicted: rank 1 of job 'silent' was declared lost (" + why +
                "); it can no longer take part in the job");
}

// A lane of an incarnation the job re-formed since sees its connections close because of the
// re-formation: its report must not break (or probe for) the set's new incarnation.
TEST(Detection, AReportFromAReformedIncarnationIsIgnored) {
  Tuttid tuttid({"--probe-timeout-ms", "60000"});
  std::vector<std::unique_ptr<RawClient>> ranks;
  for (int32_t r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<RawClient>(tuttid.endpoint()));
    wire::Frame registration = Register(r, 3);
    registration.mutable_register_()->set_job("stale-report");
    registration.mutable_register_()->set_elastic(true);
    registration.mutable_register_()->set_min_size(1);
    ranks.back()->Send(Encoded(registration));
  }
  uint64_t first_epoch = 0;
  for (auto& rank : ranks) {
    wire::Frame welcome;
    ASSERT_TRUE(rank->Receive(&welcome));
    ASSERT_TRUE(welcome.has_welcome());
    first_epoch = welcome.welcome().membership_epoch();
  }
  ranks[2].reset();  // its control connection closes: the job re-forms without it
  uint64_t epoch = 0;
  for (int r = 0; r < 2; ++r) {
    wire::Frame frame;
    do {
      ASSERT_TRUE(ranks[r]->Receive(&frame)) << "no Reformed for rank " << r;
    } while (!frame.has_reformed());
    epoch = frame.reformed().membership_epoch();
  }
  ASSERT_GT(epoch, first_epoch);
  // From the world's old incarnation: ignored. A counters query behind it proves tuttid read it.
  Report(*ranks[1], 0, 0, first_epoch);
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(7);
  ranks[1]->Send(Encoded(query));
  wire::Frame answer;
  do {
    ASSERT_TRUE(ranks[1]->Receive(&answer));
  } while (!answer.has_coordinator_counters());
  ranks[0]->SetReceiveTimeout(500);  // anything tuttid sent it before the answer is there by now
  wire::Frame frame;
  while (ranks[0]->Receive(&frame)) EXPECT_FALSE(frame.has_probe()) << "probed for a stale report";
  // From the current incarnation: probed, as ever.
  ranks[0]->SetReceiveTimeout(30000);
  Report(*ranks[1], 0, 0, epoch);
  do {
    ASSERT_TRUE(ranks[0]->Receive(&frame)) << "no probe for a current report";
  } while (!frame.has_probe());
}

}  // namespace
}  // namespace tutti::testing
