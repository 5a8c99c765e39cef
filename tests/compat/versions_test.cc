// The version rules of docs/wire-protocol.md ("Versions"), at each end: tuttid serves ranks of
// the current and the previous protocol but not both in one job, an HA group only ranks that can
// follow a failover; a rank refuses an older tuttid, and a newer one that does not serve it. Every
// refusal is asserted with its exact status and message: they are what an operator reads.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "proto/status_codec.h"
#include "proto/versions.h"
#include "server/core/coordinator_core.h"
#include "server/core/frames.h"
#include "server/core/message_codec.h"

namespace tutti::server {
namespace {

const Clock::time_point kNow{};

::testing::AssertionResult Is(const Status& s, Code code, const std::string& message) {
  if (s.code() == code && s.message() == message) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << static_cast<int>(s.code()) << " " << s.message();
}

// A frame of `version`, as a rank of that protocol stamps it.
std::string Stamped(wire::Frame frame, uint32_t version) {
  frame.set_magic(wire::kMagic);
  frame.set_version(version);
  return frame.SerializeAsString();
}

wire::Frame RegisterFrame(int32_t rank) {
  wire::Frame f;
  auto* r = f.mutable_register_();
  r->set_job("j");
  r->set_token("secret");
  r->set_rank(rank);
  r->set_size(2);
  r->set_host("h");
  r->set_data_endpoint("127.0.0.1:1");
  r->set_cache_capacity(16);
  return f;
}

struct Core {
  explicit Core(bool ha = false, bool leading = true) : core(60000, 0x5eed, Policy(), 16) {
    if (!ha) return;
    core.EnableHa([] { return true; });
    core.SetRole(leading, leading ? "tcp://self:1" : "tcp://leader:1", 1);
  }
  static Job::Policy Policy() {
    Job::Policy policy{};
    policy.heartbeat_interval_ms = 1000;
    policy.lease_ms = 5000;
    return policy;
  }
  std::map<std::string, std::vector<wire::Frame>> Send(const std::string& peer,
                                                       const std::string& bytes) {
    Outbox out;
    core.HandleFrame(peer, bytes.data(), bytes.size(), kNow, &out);
    core.Flush(&out);
    std::map<std::string, std::vector<wire::Frame>> sent;
    for (const Outgoing& o : out) sent[o.peer].push_back(frames::Decode(o));
    return sent;
  }
  CoordinatorCore core;
};

const char* kMixed =
    "protocol versions differ: rank 1 speaks protocol 5, the ranks of job 'j' before it protocol 6 "
    "(run every rank of a job with one tutti release)";
const char* kHa =
    "version mismatch: client 5, coordinator 7 (tuttid runs in an HA group, which serves ranks of "
    "protocol 6 and later: older ones cannot follow a failover)";

TEST(CompatVersions, TuttidServesTheCurrentAndThePreviousProtocols) {
  for (uint32_t version : {5u, 6u, 7u}) {
    Core c;
    c.Send("a", Stamped(RegisterFrame(0), version));
    auto sent = c.Send("b", Stamped(RegisterFrame(1), version));
    ASSERT_EQ(sent["a"].size(), 1u) << version;
    EXPECT_TRUE(sent["a"][0].has_welcome()) << version;
    EXPECT_TRUE(sent["b"][0].has_welcome()) << version;
  }
  wire::Frame out;
  const std::string old = Stamped(RegisterFrame(0), 4);
  EXPECT_TRUE(Is(DecodeClientFrame(old.data(), old.size(), &out), Code::kVersionMismatch,
                 "version mismatch: client 4, coordinator 7 (tuttid serves ranks of protocols 5 "
                 "to 7)"));
}

TEST(CompatVersions, AFrameOfProtocol5CannotCarryTheBodiesOfHaGroups) {
  wire::Frame resume;
  *resume.mutable_resume()->mutable_register_() = RegisterFrame(0).register_();
  const std::string bytes = Stamped(resume, 5);
  wire::Frame out;
  EXPECT_TRUE(Is(DecodeClientFrame(bytes.data(), bytes.size(), &out), Code::kInvalidArgument,
                 "frame body resume needs protocol 6; the frame says 5"));
  wire::Frame cache_state;
  cache_state.mutable_cache_state()->set_set_id(0);
  const std::string state = Stamped(cache_state, 5);
  EXPECT_TRUE(Is(DecodeClientFrame(state.data(), state.size(), &out), Code::kInvalidArgument,
                 "frame body cache_state needs protocol 6; the frame says 5"));
}

TEST(CompatVersions, RanksOfTwoProtocolsInOneJobFailItsRendezvousForEveryone) {
  Core c;
  EXPECT_TRUE(c.Send("a", Stamped(RegisterFrame(0), 6)).empty());
  auto sent = c.Send("b", Stamped(RegisterFrame(1), 5));
  for (const char* peer : {"a", "b"}) {
    ASSERT_EQ(sent[peer].size(), 1u) << peer;
    ASSERT_TRUE(sent[peer][0].has_refusal()) << peer;
    EXPECT_TRUE(Is(wire::ToStatus(sent[peer][0].refusal().error()), Code::kMismatch, kMixed));
  }
  EXPECT_EQ(c.core.job_count(), 0u);  // a later registration starts afresh
  // Protocols 6 and 7 differ only in what ranks send each other (the data-plane handshake):
  // tuttid reads both alike, and still keeps them out of one job, where they could not connect.
  Core d;
  EXPECT_TRUE(d.Send("a", Stamped(RegisterFrame(0), 7)).empty());
  auto mixed = d.Send("b", Stamped(RegisterFrame(1), 6));
  ASSERT_TRUE(mixed["b"].at(0).has_refusal());
  EXPECT_EQ(wire::ToStatus(mixed["b"][0].refusal().error()).code(), Code::kMismatch);
  c.Send("c", Stamped(RegisterFrame(0), 5));
  sent = c.Send("d", Stamped(RegisterFrame(1), 5));
  EXPECT_TRUE(sent["c"][0].has_welcome());
}

TEST(CompatVersions, AnHaGroupRefusesRanksThatCannotFollowAFailover) {
  Core leader(/*ha=*/true);
  auto sent = leader.Send("a", Stamped(RegisterFrame(0), 5));
  ASSERT_TRUE(sent["a"].at(0).has_refusal());
  EXPECT_TRUE(Is(wire::ToStatus(sent["a"][0].refusal().error()), Code::kVersionMismatch, kHa));
  // A standby tells such a rank the same, where a Redirect it cannot read would leave it waiting.
  Core standby(/*ha=*/true, /*leading=*/false);
  sent = standby.Send("a", Stamped(RegisterFrame(0), 5));
  ASSERT_TRUE(sent["a"].at(0).has_refusal());
  EXPECT_TRUE(Is(wire::ToStatus(sent["a"][0].refusal().error()), Code::kVersionMismatch, kHa));
  sent = standby.Send("b", Stamped(RegisterFrame(0), 6));
  EXPECT_TRUE(sent["b"].at(0).has_redirect());
}

// The rank's side (client/control/coordinator_link.cc runs it on every frame it receives).
TEST(CompatVersions, ARankRefusesAnOlderTuttidAndANewerOneThatDoesNotServeIt) {
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  heartbeat.set_version(wire::kProtocolVersion);
  EXPECT_TRUE(wire::CheckCoordinatorVersion(heartbeat).ok());
  heartbeat.set_version(wire::kProtocolVersion + 1);  // a newer tuttid serving N-1
  EXPECT_TRUE(wire::CheckCoordinatorVersion(heartbeat).ok());

  heartbeat.set_version(5);
  EXPECT_TRUE(Is(wire::CheckCoordinatorVersion(heartbeat), Code::kVersionMismatch,
                 "version mismatch: tuttid speaks protocol 5, older than this rank's 7: upgrade "
                 "tuttid before the jobs that use it (docs/wire-protocol.md, \"Versions\")"));

  wire::Frame refusal;
  refusal.set_version(8);
  wire::ToWire(Status(Code::kVersionMismatch, "version mismatch: client 6, coordinator 8 "
                                              "(tuttid serves ranks of protocols 7 to 8)"),
               refusal.mutable_refusal()->mutable_error());
  EXPECT_TRUE(Is(wire::CheckCoordinatorVersion(refusal), Code::kVersionMismatch,
                 "version mismatch: tuttid speaks protocol 8 and does not serve this rank's "
                 "protocol 7 (tuttid: version mismatch: client 6, coordinator 8 (tuttid serves "
                 "ranks of protocols 7 to 8)): run the job with a newer tutti "
                 "(docs/wire-protocol.md, \"Versions\")"));

  // A body of a later schema (field 40, a length-delimited message) parses as no body.
  std::string later = Stamped(wire::Frame{}, 8);
  later += std::string("\xc2\x02\x00", 3);
  wire::Frame unknown;
  ASSERT_TRUE(unknown.ParseFromString(later));
  ASSERT_EQ(unknown.body_case(), wire::Frame::BODY_NOT_SET);
  EXPECT_TRUE(Is(wire::CheckCoordinatorVersion(unknown), Code::kVersionMismatch,
                 "version mismatch: tuttid speaks protocol 8 and does not serve this rank's "
                 "protocol 7 (it sent a frame this rank cannot read): run the job with a newer "
                 "tutti (docs/wire-protocol.md, \"Versions\")"));
}

}  // namespace
}  // namespace tutti::server
