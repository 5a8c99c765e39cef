// The coordinator core's part in an HA group (server/core/coordinator_ha.cc, job_resume.cc),
// driven frame by frame without sockets: a standby redirects, a leader keeps job records, a new
// leader takes a job back from its ranks' Resume frames (replaying to the member that lags exactly
// the Execute a leading member got, rebuilding the response cache from CacheState), the fence
// holds releases, a deposed leader forgets its jobs, and every refusal a rank can cause.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "proto/cache_bits.h"
#include "proto/status_codec.h"
#include "server/core/coordinator_core.h"
#include "server/core/frames.h"
#include "unit/test_specs.h"

namespace tutti {
// Statuses compare by code and message: the tests assert both, exactly.
bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}
void PrintTo(const Status& s, std::ostream* os) { *os << static_cast<int>(s.code()) << " " << s.message(); }
}  // namespace tutti

namespace tutti::server {
namespace {

constexpr uint64_t kGroupEpoch = 0x5eed;
const Clock::time_point kNow{};

Job::Policy Policy() {
  Job::Policy policy{};
  policy.heartbeat_interval_ms = 1000;
  policy.lease_ms = 5000;
  return policy;
}

struct Core {
  explicit Core(bool ha, bool leading = true, uint64_t term = 1)
      : core(60000, kGroupEpoch, Policy(), 16) {
    if (!ha) return;
    core.EnableHa([this] { return may_release; });
    core.SetRole(leading, leading ? "tcp://self:1" : "tcp://leader:1", term);
  }
  // Hands `frame` from `peer` to the core; returns what it sent, by recipient.
  std::map<std::string, std::vector<wire::Frame>> Send(const std::string& peer, wire::Frame frame) {
    const std::string bytes = wire::Encode(frame, kGroupEpoch);
    Outbox out;
    core.HandleFrame(peer, bytes.data(), bytes.size(), kNow, &out);
    core.Flush(&out);
    std::map<std::string, std::vector<wire::Frame>> sent;
    for (const Outgoing& o : out) sent[o.peer].push_back(frames::Decode(o));
    return sent;
  }
  CoordinatorCore core;
  bool may_release = true;
};

wire::Register Registration(int32_t rank) {
  wire::Register r;
  r.set_job("j");
  r.set_token("secret");
  r.set_rank(rank);
  r.set_size(2);
  r.set_host("h");
  r.set_data_endpoint("127.0.0.1:1");
  r.set_cache_capacity(16);
  r.set_no_fast_path(true);
  return r;
}

wire::Frame RegisterFrame(int32_t rank) {
  wire::Frame f;
  *f.mutable_register_() = Registration(rank);
  return f;
}

wire::Frame AnnounceFrame(const wire::TensorSpec& spec) {
  wire::Frame f;
  auto* set = f.mutable_announce()->add_sets();
  set->set_set_id(0);
  *set->add_tensors() = spec;
  return f;
}

wire::Frame AnnounceBits(const std::vector<uint32_t>& slots) {
  wire::Frame f;
  auto* set = f.mutable_announce()->add_sets();
  set->set_set_id(0);
  wire::EncodeCacheBits(slots, set);
  return f;
}

// Rank `rank`'s Resume: it got `executes` Executes of the world, the last ones `recent`.
wire::Frame ResumeFrame(int32_t rank, uint64_t executes, const std::vector<wire::Execute>& recent,
                        const std::string& token = "secret") {
  wire::Frame f;
  wire::Resume& r = *f.mutable_resume();
  *r.mutable_register_() = Registration(rank);
  r.mutable_register_()->set_token(token);
  r.set_slot(rank);
  r.set_membership_epoch(1);
  r.set_job_secret(std::string(32, 'k'));
  auto* set = r.add_sets();
  set->set_set_id(0);
  set->set_executes(executes);
  for (const wire::Execute& e : recent) set->add_recent(e.SerializeAsString());
  return f;
}

Status RefusalOf(const std::vector<wire::Frame>& sent) {
  EXPECT_EQ(sent.size(), 1u);
  if (sent.empty() || !sent[0].has_refusal()) return Status(Code::kInternal, "no refusal");
  return wire::ToStatus(sent[0].refusal().error());
}

// A leader whose two-rank job ran one allreduce: its record, and the Execute both ranks got.
struct RanJob {
  std::map<std::string, std::string> records;
  wire::Execute first;
};

RanJob RunOneStep() {
  Core leader(/*ha=*/true);
  leader.Send("r0", RegisterFrame(0));
  auto welcomed = leader.Send("r1", RegisterFrame(1));
  EXPECT_TRUE(welcomed["r0"][0].has_welcome());
  leader.Send("r0", AnnounceFrame(Spec("t", 4)));
  auto sent = leader.Send("r1", AnnounceFrame(Spec("t", 4)));
  RanJob ran;
  EXPECT_EQ(sent["r0"].size(), 1u);
  ran.first = sent["r0"].at(0).execute();
  EXPECT_EQ(ran.first.seq(), 0u);
  for (auto& [id, record] : leader.core.TakeRecordChanges()) ran.records[id] = record;
  return ran;
}

TEST(CoordinatorHa, AStandbyAnswersEveryFrameWithARedirectToTheLeader) {
  Core standby(/*ha=*/true, /*leading=*/false);
  for (const wire::Frame& frame : {RegisterFrame(0), AnnounceFrame(Spec("t", 4))}) {
    auto sent = standby.Send("r0", frame);
    ASSERT_EQ(sent["r0"].size(), 1u);
    ASSERT_TRUE(sent["r0"][0].has_redirect());
    EXPECT_EQ(sent["r0"][0].redirect().leader(), "tcp://leader:1");
  }
  EXPECT_EQ(standby.core.job_count(), 0u);
}

TEST(CoordinatorHa, ALeaderRecordsItsJobsWhenTheyChangeAndErasesThemAtTheEnd) {
  Core leader(/*ha=*/true);
  leader.Send("r0", RegisterFrame(0));
  EXPECT_TRUE(leader.core.TakeRecordChanges().empty()) << "nothing to record before the rendezvous";
  leader.Send("r1", RegisterFrame(1));
  auto changes = leader.core.TakeRecordChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].first, "j");
  JobRecord record;
  ASSERT_TRUE(JobRecord::FromJson(changes[0].second, &record).ok());
  EXPECT_EQ(record.token_sha256, TokenHash("secret"));
  EXPECT_EQ(record.size, 2);
  EXPECT_EQ(record.membership_epoch, 1u);
  EXPECT_TRUE(record.resumable);
  ASSERT_EQ(record.sets.size(), 1u);
  EXPECT_EQ(record.sets[0].second, (std::vector<int32_t>{0, 1}));
  // A step changes nothing etcd keeps.
  leader.Send("r0", AnnounceFrame(Spec("t", 4)));
  leader.Send("r1", AnnounceFrame(Spec("t", 4)));
  EXPECT_TRUE(leader.core.TakeRecordChanges().empty());
  wire::Frame bye;
  bye.mutable_bye();
  leader.Send("r0", bye);
  leader.Send("r1", bye);
  changes = leader.core.TakeRecordChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].second, "") << "the job ended: its record goes";
}

TEST(CoordinatorHa, ANewLeaderReplaysToTheLaggingMemberExactlyWhatTheLeadingOneGot) {
  RanJob ran = RunOneStep();
  Core next(/*ha=*/true, /*leading=*/true, /*term=*/2);
  next.core.LoadRecords(ran.records);
  // Rank 0 got the Execute; rank 1 did not (the old leader died between the two sends).
  EXPECT_TRUE(next.Send("r0b", ResumeFrame(0, 1, {ran.first})).empty());
  auto sent = next.Send("r1b", ResumeFrame(1, 0, {}));
  ASSERT_EQ(sent["r1b"].size(), 2u);
  ASSERT_TRUE(sent["r1b"][0].has_execute());
  EXPECT_EQ(sent["r1b"][0].execute().SerializeAsString(), ran.first.SerializeAsString());
  EXPECT_EQ(sent["r1b"][0].term(), 2u);
  EXPECT_TRUE(sent["r1b"][1].has_resumed());
  ASSERT_EQ(sent["r0b"].size(), 1u);
  EXPECT_TRUE(sent["r0b"][0].has_resumed());
  // Both now hold slot 0 for "t" (assigned in the replayed Execute): their caches come back, and
  // the next step, announced as one bit each, goes on numbering the stream at 1.
  for (const std::string peer : {"r0b", "r1b"}) {
    wire::Frame state;
    state.mutable_cache_state()->set_set_id(0);
    auto* slot = state.mutable_cache_state()->add_slots();
    slot->set_slot(0);
    *slot->mutable_spec() = Spec("t", 4);
    EXPECT_TRUE(next.Send(peer, state).empty());
  }
  next.Send("r0b", AnnounceBits({0}));
  sent = next.Send("r1b", AnnounceBits({0}));
  ASSERT_EQ(sent["r0b"].size(), 1u);
  const wire::Execute& execute = sent["r0b"][0].execute();
  EXPECT_EQ(execute.seq(), 1u);
  ASSERT_EQ(execute.responses_size(), 1);
  EXPECT_EQ(execute.responses(0).cache_slot(), 1u) << "a reference to slot 0";
  EXPECT_FALSE(execute.responses(0).has_spec()) << "every member already holds it";
}

TEST(CoordinatorHa, TheFenceHoldsReleasesUntilTheLeaseIsCertainlyHeldAgain) {
  Core leader(/*ha=*/true);
  leader.Send("r0", RegisterFrame(0));
  leader.Send("r1", RegisterFrame(1));
  leader.may_release = false;
  leader.Send("r0", AnnounceFrame(Spec("t", 4)));
  EXPECT_TRUE(leader.Send("r1", AnnounceFrame(Spec("t", 4))).empty());
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  auto sent = leader.Send("r0", heartbeat);
  ASSERT_EQ(sent["r0"].size(), 1u);
  EXPECT_TRUE(sent["r0"][0].has_heartbeat()) << "a fenced leader still answers heartbeats";
  leader.may_release = true;
  Outbox out;
  leader.core.Flush(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(frames::Decode(out[0]).has_execute());
}

TEST(CoordinatorHa, ADeposedLeaderForgetsItsJobsWithoutAWordToTheirRanks) {
  Core leader(/*ha=*/true);
  leader.Send("r0", RegisterFrame(0));
  leader.Send("r1", RegisterFrame(1));
  ASSERT_EQ(leader.core.job_count(), 1u);
  leader.core.SetRole(false, "tcp://other:1", 0);
  EXPECT_EQ(leader.core.job_count(), 0u);
  auto sent = leader.Send("r0", AnnounceFrame(Spec("t", 4)));
  ASSERT_EQ(sent["r0"].size(), 1u);
  EXPECT_EQ(sent["r0"][0].redirect().leader(), "tcp://other:1");
}

TEST(CoordinatorHa, ARankOfALiveJobThatResumesMakesEveryRankResume) {
  Core leader(/*ha=*/true);
  leader.Send("r0", RegisterFrame(0));
  leader.Send("r1", RegisterFrame(1));
  (void)leader.core.TakeRecordChanges();  // as the service does every turn
  // Rank 0 lost this leader for a while (it was frozen) and comes back with Resume.
  auto sent = leader.Send("r0", ResumeFrame(0, 0, {}));
  ASSERT_EQ(sent["r1"].size(), 1u);
  EXPECT_EQ(sent["r1"][0].redirect().leader(), "tcp://self:1");
  // What rank 1 sent before it heard the Redirect is dropped, not refused (a refusal would end
  // its link while it fails over).
  EXPECT_TRUE(leader.Send("r1", AnnounceFrame(Spec("t", 4))).empty());
  sent = leader.Send("r1", ResumeFrame(1, 0, {}));
  ASSERT_EQ(sent["r0"].size(), 1u);
  EXPECT_TRUE(sent["r0"][0].has_resumed());
  EXPECT_TRUE(sent["r1"][0].has_resumed());
}

TEST(CoordinatorHa, ResumesThatCannotBeTakenBackAreRefusedNamingWhy) {
  RanJob ran = RunOneStep();
  {
    Core lone(/*ha=*/false);
    EXPECT_EQ(RefusalOf(lone.Send("r0", ResumeFrame(0, 1, {}))["r0"]),
              Status(Code::kInvalidArgument,
                     "resume: this tuttid is not part of an HA group (start it with --etcd and "
                     "--ha-group)"));
  }
  Core next(/*ha=*/true, true, 2);
  EXPECT_EQ(RefusalOf(next.Send("r0", ResumeFrame(0, 1, {}))["r0"]),
            Status(Code::kCoordinatorLost,
                   "coordinator lost: the HA group has no record of job 'j' (it ended, or its "
                   "leader died before recording it); restart the job"));
  next.core.LoadRecords(ran.records);
  EXPECT_EQ(RefusalOf(next.Send("r0", ResumeFrame(0, 1, {}, "guess"))["r0"]),
            Status(Code::kAuthFailed, "wrong token for job 'j'"));
  wire::Frame later = ResumeFrame(0, 1, {});
  later.mutable_resume()->set_membership_epoch(3);
  EXPECT_EQ(RefusalOf(next.Send("r0", later)["r0"]),
            Status(Code::kMismatch,
                   "resume: job 'j' is in membership epoch 1 with 2 ranks, not 3 with 2"));
  // A member that lags by more than the others kept cannot be caught up: the job fails.
  EXPECT_TRUE(next.Send("r0", ResumeFrame(0, 1, {})).empty());
  auto sent = next.Send("r1", ResumeFrame(1, 0, {}));
  const Status lost(Code::kCoordinatorLost,
                    "coordinator lost: job 'j' cannot resume: rank 1 lags 1 Executes behind in "
                    "process set 0, more than the others kept");
  EXPECT_EQ(RefusalOf(sent["r0"]), lost);
  EXPECT_EQ(RefusalOf(sent["r1"]), lost);
}

}  // namespace
}  // namespace tutti::server
