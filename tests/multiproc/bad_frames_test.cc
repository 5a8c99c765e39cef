// Frames a rank would never send, thrown at a real tuttid from raw ZeroMQ sockets while a job
// runs on it: each offender gets the exact refusal (or is disconnected, for oversized frames),
// and the job completes.
#include <gtest/gtest.h>
#include <zmq.hpp>

#include "multiproc/cluster.h"
#include "multiproc/raw_client.h"
#include "proto/protocol.h"

namespace tutti::testing {
namespace {

struct Case {
  const char* what;
  std::vector<std::string> parts;
  std::string refusal;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"garbage", {std::string("\xff\xff\xff\xff\x0f garbage", 13)},
                   "-1 malformed frame: not a tutti protobuf message"});
  cases.push_back({"empty frame", {""}, "-1 bad magic 0x00000000: not a tutti client"});
  std::string truncated = Encoded(Register(0, 2));
  truncated.resize(truncated.size() - 3);
  cases.push_back({"truncated", {truncated}, "-1 malformed frame: not a tutti protobuf message"});
  wire::Frame unstamped = Register(0, 2);
  cases.push_back({"no magic", {unstamped.SerializeAsString()},
                   "-1 bad magic 0x00000000: not a tutti client"});
  wire::Frame future = Register(0, 2);
  future.set_magic(wire::kMagic);
  future.set_version(99);
  cases.push_back({"other protocol version", {future.SerializeAsString()},
                   "-11 version mismatch: client 99, coordinator 7 (tuttid serves ranks of "
                   "protocols 5 to 7)"});
  cases.push_back({"two frames", {Encoded(Register(0, 2)), "extra"},
                   "-1 a message must be exactly one frame, got 2"});
  cases.push_back({"negative size", {Encoded(Register(0, -1))},
                   "-1 register: world size -1 outside [1, 1048576]"});
  cases.push_back({"absurd size", {Encoded(Register(0, 1 << 30))},
                   "-1 register: world size 1073741824 outside [1, 1048576]"});
  wire::Frame announce;
  auto* spec = announce.mutable_announce()->add_sets()->add_tensors();
  spec->set_name("x");
  spec->set_kind(wire::COLLECTIVE_ALLREDUCE);
  spec->set_dtype(3);
  spec->set_reduce_op(1);
  cases.push_back({"announce before register", {Encoded(announce)},
                   "-1 register before sending anything else"});
  spec->set_dtype(1234);
  cases.push_back({"unknown dtype", {Encoded(announce)}, "-1 tensor 'x': unknown dtype 1234"});
  spec->set_dtype(3);
  spec->add_shape(-5);
  cases.push_back({"negative dimension", {Encoded(announce)}, "-1 tensor 'x': negative dimension -5"});
  spec->clear_shape();
  for (int i = 0; i < 3; ++i) spec->add_shape(int64_t{1} << 40);
  cases.push_back({"overflowing shape", {Encoded(announce)}, "-1 tensor 'x': shape too large"});
  wire::Frame welcome;
  welcome.mutable_welcome()->set_local_rank(3);
  cases.push_back({"server-only body", {Encoded(welcome)}, "-1 frame body 11 is not sent by ranks"});
  wire::Frame no_cache = Register(0, 2);
  no_cache.mutable_register_()->set_cache_capacity(-1);
  cases.push_back({"negative cache capacity", {Encoded(no_cache)},
                   "-1 register: cache capacity -1 outside [0, 1048576]"});
  wire::Frame no_fusion = Register(0, 2);
  no_fusion.mutable_register_()->set_fusion_threshold(-1);
  cases.push_back({"negative fusion threshold", {Encoded(no_fusion)},
                   "-1 register: negative fusion threshold"});
  wire::Frame bits;
  bits.mutable_announce()->add_sets()->set_cached(std::string((1 << 20) / 8 + 2, '\xff'));
  cases.push_back({"cache bits beyond any capacity", {Encoded(bits)},
                   "-1 announce: cache bits beyond the largest capacity, 1048576"});
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  cases.push_back({"heartbeat before register", {Encoded(heartbeat)},
                   "-1 register before sending anything else"});
  return cases;
}

TEST(BadFrames, EachIsRefusedWhileAJobRuns) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "steady", 2);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("w 0", In(60))) << rank->transcript();

  for (const Case& c : Cases()) {
    RawClient client(tuttid.endpoint());
    client.SendParts(c.parts);
    EXPECT_EQ(client.Refusal(), c.refusal) << c.what;
  }

  // Over ZMQ_MAXMSGSIZE: ZeroMQ drops the connection; nothing is answered, nothing is kept.
  RawClient huge(tuttid.endpoint());
  huge.SetReceiveTimeout(1000);
  huge.Send(std::string(static_cast<size_t>(wire::kMaxFrameBytes) + 1, 'x'));
  EXPECT_EQ(huge.Refusal(), "");

  // A frame claiming another coordinator epoch is a rank of a tuttid that restarted.
  wire::Frame stale;
  stale.mutable_heartbeat();
  RawClient old(tuttid.endpoint());
  old.Send(wire::Encode(stale, 0x1234));
  const std::string refusal = old.Refusal();
  EXPECT_EQ(refusal.rfind("-7 coordinator lost: tuttid restarted (this rank joined epoch 0000000000001234, "
                          "tuttid now runs epoch ", 0), 0u) << refusal;

  // The job still makes progress, and finishes cleanly.
  for (auto& rank : ranks) {
    auto line = rank->ReadLine(In(60));
    ASSERT_TRUE(line) << rank->transcript();
    ASSERT_TRUE(rank->ReadUntil("w ", In(60))) << rank->transcript();
    rank->WriteLine("go");
  }
  ExpectAllSucceed(ranks);
  EXPECT_FALSE(tuttid.process().Wait(Clock::now()).has_value()) << "tuttid exited";
}

// Registers rank 0 of a one-rank job with a response cache, and takes its Welcome.
void JoinAlone(RawClient& client, const std::string& job) {
  wire::Frame registration = Register(0, 1);
  registration.mutable_register_()->set_job(job);
  registration.mutable_register_()->set_cache_capacity(16);
  client.Send(Encoded(registration));
  EXPECT_EQ(client.Refusal(), "not a refusal");  // the Welcome
}

// A rank announcing a response-cache slot it was never given: refused naming the slot, the job
// goes on.
TEST(BadFrames, UnknownCacheSlotIsRefused) {
  Tuttid tuttid;
  RawClient client(tuttid.endpoint());
  JoinAlone(client, "solo");
  wire::Frame announce;
  auto* set = announce.mutable_announce()->add_sets();
  set->set_cached(std::string(1, '\x20'));  // slot 5
  client.Send(Encoded(announce));
  EXPECT_EQ(client.Refusal(),
            "-1 rank 0 announced response-cache slot 5 of process set 0, which holds no tensor of it");
}

// A frame full of bits naming empty slots gets one refusal per set, not one per bit: a 16 MiB
// frame could otherwise make tuttid build a hundred million answers.
TEST(BadFrames, ManyUnknownCacheSlotsGetOneRefusal) {
  Tuttid tuttid;
  RawClient client(tuttid.endpoint());
  JoinAlone(client, "bits");
  wire::Frame announce;
  announce.mutable_announce()->add_sets()->set_cached(std::string(4096, '\xff'));  // 32768 slots
  client.Send(Encoded(announce));
  EXPECT_EQ(client.Refusal(),
            "-1 rank 0 announced response-cache slot 0 of process set 0, which holds no tensor of it");
  // Proof that nothing else is queued: the next answer is the counters query's.
  wire::Frame query;
  query.mutable_counters_query()->set_request_id(7);
  client.Send(Encoded(query));
  wire::Frame answer;
  ASSERT_TRUE(client.Receive(&answer));
  EXPECT_TRUE(answer.has_coordinator_counters());
}

TEST(BadFrames, JobsBeyondTheLimitAreRefused) {
  Tuttid tuttid({"--max-jobs", "2", "--log-level", "info"});
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int job = 0; job < 3; ++job) {
    const std::string id = "job-" + std::to_string(job);
    wire::Frame frame = Register(0, 2);  // jobs of 2 ranks that never complete
    frame.mutable_register_()->set_job(id);
    clients.push_back(std::make_unique<RawClient>(tuttid.endpoint()));
    clients.back()->Send(Encoded(frame));
    // Separate sockets have no order between them: wait until tuttid took this one.
    if (job < 2) {
      ASSERT_TRUE(tuttid.process().ReadUntilContaining("job '" + id + "': created", In(60)))
          << tuttid.process().transcript();
    }
  }
  clients.back()->SetReceiveTimeout(10000);
  EXPECT_EQ(clients.back()->Refusal(), "-18 limit exceeded: tuttid already serves 2 jobs, its limit (--max-jobs)");
}

}  // namespace
}  // namespace tutti::testing
