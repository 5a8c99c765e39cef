// The coordinator's half of GPU support against a real tuttid, from raw ZeroMQ clients that speak
// the wire format (no GPU needed): the device path and group of released collectives, and the
// relay of a set's NCCL unique id from its first member to the others (docs/wire-protocol.md,
// "Device paths").
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "common/status.h"
#include "multiproc/raw_client.h"

namespace tutti::testing {
namespace {

constexpr int32_t kCpu = 0, kCuda = 1;

std::string Uuid(char fill) { return std::string(16, fill); }

// The ranks of one job, each a raw client registered with its own host identity.
class RawJob {
 public:
  RawJob(const Tuttid& tuttid, const std::string& job, const std::vector<std::string>& hosts) {
    for (size_t r = 0; r < hosts.size(); ++r) {
      ranks_.push_back(std::make_unique<RawClient>(tuttid.endpoint()));
      wire::Frame frame = Register(static_cast<int32_t>(r), static_cast<int32_t>(hosts.size()));
      frame.mutable_register_()->set_job(job);
      frame.mutable_register_()->set_token("secret");
      frame.mutable_register_()->set_host(hosts[r]);
      frame.mutable_register_()->set_cache_capacity(16);
      // These raw ranks speak the negotiation alone; they run no fast path (docs/steady-state.md).
      frame.mutable_register_()->set_no_fast_path(true);
      ranks_.back()->Send(Encoded(frame));
    }
    for (auto& rank : ranks_) {
      wire::Frame welcome;
      EXPECT_TRUE(rank->Receive(&welcome) && welcome.has_welcome()) << welcome.DebugString();
    }
  }
  RawClient& operator[](size_t rank) { return *ranks_[rank]; }

  // Every rank in `ranks` announces `specs[i]` on `set_id`; returns the Execute each received.
  std::vector<wire::Execute> Allreduce(int32_t set_id, const std::vector<int32_t>& ranks,
                                       const std::vector<wire::TensorSpec>& specs) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      wire::Frame frame;
      auto* set = frame.mutable_announce()->add_sets();
      set->set_set_id(set_id);
      *set->add_tensors() = specs[i];
      ranks_[ranks[i]]->Send(Encoded(frame));
    }
    return Executes(ranks);
  }
  // Every rank in `ranks` announces cache slot `slot` on `set_id`.
  std::vector<wire::Execute> AllreduceCached(int32_t set_id, const std::vector<int32_t>& ranks,
                                             uint32_t slot) {
    for (int32_t r : ranks) {
      wire::Frame frame;
      auto* set = frame.mutable_announce()->add_sets();
      set->set_set_id(set_id);
      set->set_cached(std::string(1, static_cast<char>(1 << slot)));
      ranks_[r]->Send(Encoded(frame));
    }
    return Executes(ranks);
  }

  // Adds the set of `ranks` (every one of them asks); returns its id.
  int32_t AddSet(const std::vector<int32_t>& ranks) {
    for (int32_t r : ranks) {
      wire::Frame frame;
      frame.mutable_set_add()->set_request_id(1);
      frame.mutable_set_add()->mutable_ranks()->Add(ranks.begin(), ranks.end());
      frame.mutable_set_add()->set_timeout_ms(30000);
      ranks_[r]->Send(Encoded(frame));
    }
    int32_t id = -1;
    for (int32_t r : ranks) {
      wire::Frame reply;
      EXPECT_TRUE(ranks_[r]->Receive(&reply) && reply.has_set_reply()) << reply.DebugString();
      id = reply.set_reply().set().id();
    }
    return id;
  }
  void RemoveSet(int32_t set_id, const std::vector<int32_t>& ranks) {
    for (int32_t r : ranks) {
      wire::Frame frame;
      frame.mutable_set_remove()->set_request_id(2);
      frame.mutable_set_remove()->set_set_id(set_id);
      frame.mutable_set_remove()->set_timeout_ms(30000);
      ranks_[r]->Send(Encoded(frame));
    }
    for (int32_t r : ranks) {
      wire::Frame reply;
      EXPECT_TRUE(ranks_[r]->Receive(&reply) && reply.has_set_reply()) << reply.DebugString();
      EXPECT_FALSE(reply.set_reply().has_error()) << reply.DebugString();
    }
  }

 private:
  std::vector<wire::Execute> Executes(const std::vector<int32_t>& ranks) {
    std::vector<wire::Execute> executes;
    for (int32_t r : ranks) {
      wire::Frame frame;
      EXPECT_TRUE(ranks_[r]->Receive(&frame) && frame.has_execute()) << frame.DebugString();
      executes.push_back(frame.execute());
      EXPECT_EQ(frame.execute().responses_size(), 1);
      if (frame.execute().responses_size() == 0) executes.back().add_responses();
    }
    return executes;
  }

  std::vector<std::unique_ptr<RawClient>> ranks_;
};

wire::TensorSpec Allreduce(const std::string& name, int32_t device_type, int32_t device_index,
                           std::string uuid = "") {
  wire::TensorSpec spec;
  spec.set_name(name);
  spec.set_kind(wire::COLLECTIVE_ALLREDUCE);
  spec.set_dtype(3);  // TUTTI_DTYPE_FLOAT32
  spec.set_reduce_op(1);
  spec.set_prescale(1.0);
  spec.set_postscale(1.0);
  spec.add_shape(256);
  spec.set_device_type(device_type);
  spec.set_device_index(device_index);
  spec.set_device_uuid(std::move(uuid));
  return spec;
}

// Every member received the same one response, on `path` and `group`, without error.
void ExpectPath(const std::vector<wire::Execute>& executes, wire::DevicePath path, int32_t group) {
  for (const auto& execute : executes) {
    const wire::Response& r = execute.responses(0);
    EXPECT_FALSE(r.has_error() && r.error().code() != 0) << r.error().message();
    EXPECT_EQ(r.device_path(), path) << r.DebugString();
    EXPECT_EQ(r.device_group(), group) << r.DebugString();
  }
}

wire::Frame CommIdFrame(int32_t set_id, int32_t group, const std::string& id) {
  wire::Frame frame;
  frame.mutable_comm_id()->set_set_id(set_id);
  frame.mutable_comm_id()->set_device_group(group);
  frame.mutable_comm_id()->set_id(id);
  return frame;
}

// The refusal `client` got next, as "<code> <message>", with its set id checked.
std::string RefusalFor(RawClient& client, int32_t set_id) {
  wire::Frame frame;
  if (!client.Receive(&frame)) return "nothing";
  if (!frame.has_refusal()) return "not a refusal: " + frame.DebugString();
  EXPECT_EQ(frame.refusal().set_id(), set_id);
  return std::to_string(frame.refusal().error().code()) + " " + frame.refusal().error().message();
}

// Whether `client` receives nothing within `ms`.
bool Silent(RawClient& client, int ms = 300) {
  client.SetReceiveTimeout(ms);
  wire::Frame frame;
  const bool silent = !client.Receive(&frame);
  client.SetReceiveTimeout(10000);
  return silent;
}

TEST(DevicePaths, OwnGpusRunNcclASharedGpuRunsStagedAndAHostMemberIsAMismatch) {
  Tuttid tuttid({"--lease-ms", "60000"});
  const std::string h1 = "h1/boot-1/netns:1";
  RawJob job(tuttid, "paths", {h1, h1, h1});
  // One host, three GPUs (each process sees its own as cuda:0).
  auto executes = job.Allreduce(0, {0, 1, 2},
                                {Allreduce("own", kCuda, 0, Uuid('a')),
                                 Allreduce("own", kCuda, 0, Uuid('b')),
                                 Allreduce("own", kCuda, 0, Uuid('c'))});
  ExpectPath(executes, wire::DEVICE_PATH_NCCL, 0);
  EXPECT_EQ(executes[0].responses(0).cache_slot(), 1u);
  // Again from the response cache: a reference without the spec still says how it runs.
  executes = job.AllreduceCached(0, {0, 1, 2}, 0);
  ExpectPath(executes, wire::DEVICE_PATH_NCCL, 0);
  EXPECT_FALSE(executes[0].responses(0).has_spec());
  // Rank 2's tensor in host memory under the same name: refused for every member (Horovod's
  // rule), and no device combination is taken.
  executes = job.Allreduce(0, {0, 1, 2},
                           {Allreduce("mixed", kCuda, 0, Uuid('a')),
                            Allreduce("mixed", kCuda, 0, Uuid('b')), Allreduce("mixed", kCpu, 0)});
  ASSERT_EQ(executes.size(), 3u);
  for (const auto& execute : executes) {
    const wire::Response& r = execute.responses(0);
    EXPECT_EQ(r.error().code(), static_cast<int>(tutti::Code::kMismatch)) << r.DebugString();
    EXPECT_EQ(r.error().message(),
              "mismatched CPU/GPU device selection for 'mixed' on process set 0: rank 0 has it on "
              "cuda:0, rank 2 on the CPU; every member's tensor must be on the CPU, or every "
              "member's on a GPU");
  }
  // Ranks 0 and 1 on one GPU.
  executes = job.Allreduce(0, {0, 1, 2},
                           {Allreduce("shared", kCuda, 0, Uuid('\x11')),
                            Allreduce("shared", kCuda, 1, Uuid('\x11')),
                            Allreduce("shared", kCuda, 0, Uuid('c'))});
  ExpectPath(executes, wire::DEVICE_PATH_STAGED, 1);
  EXPECT_TRUE(tuttid.process().ReadUntilContaining(
      "job 'paths': process set 0: 'shared' runs staged through host memory: ranks 0 and 1 share "
      "GPU GPU-11111111-1111-1111-1111-111111111111 on host h1 (device group 1)",
      In(30)))
      << tuttid.process().transcript();
  // All on the host: no device group.
  executes = job.Allreduce(0, {0, 1, 2},
                           {Allreduce("host", kCpu, 0), Allreduce("host", kCpu, 0),
                            Allreduce("host", kCpu, 0)});
  ExpectPath(executes, wire::DEVICE_PATH_HOST, 0);
}

TEST(DevicePaths, EqualUuidsOnDifferentHostsAreOwnGpus) {
  Tuttid tuttid({"--lease-ms", "60000"});
  RawJob job(tuttid, "hosts", {"h1/boot-1/netns:1", "h2/boot-2/netns:1", "h3/boot-3/netns:1"});
  const auto executes = job.Allreduce(0, {0, 1, 2},
                                      {Allreduce("g", kCuda, 0, Uuid('a')),
                                       Allreduce("g", kCuda, 0, Uuid('a')),
                                       Allreduce("g", kCuda, 0, Uuid('a'))});
  ExpectPath(executes, wire::DEVICE_PATH_NCCL, 0);
}

TEST(CommIdRelay, TheFirstMembersIdReachesTheOtherMembersUnchanged) {
  Tuttid tuttid({"--lease-ms", "60000"});
  RawJob job(tuttid, "relay", {"h1/b/n", "h1/b/n", "h2/b/n"});
  ExpectPath(job.Allreduce(0, {0, 1, 2},
                           {Allreduce("g", kCuda, 0, Uuid('a')), Allreduce("g", kCuda, 1, Uuid('b')),
                            Allreduce("g", kCuda, 0, Uuid('c'))}),
             wire::DEVICE_PATH_NCCL, 0);
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 1);
  job[0].Send(Encoded(CommIdFrame(0, 0, id)));
  for (int r : {1, 2}) {
    wire::Frame frame;
    ASSERT_TRUE(job[r].Receive(&frame)) << "rank " << r;
    ASSERT_TRUE(frame.has_comm_id()) << frame.DebugString();
    EXPECT_EQ(frame.comm_id().set_id(), 0);
    EXPECT_EQ(frame.comm_id().device_group(), 0);
    EXPECT_EQ(frame.comm_id().id(), id);
  }
  EXPECT_TRUE(Silent(job[0]));  // not back to the sender

  // In a set of ranks 1 and 2, rank 1 generates it, and rank 0 does not hear of it.
  const int32_t set = job.AddSet({1, 2});
  ASSERT_GT(set, 0);
  job[1].Send(Encoded(CommIdFrame(set, 0, "early")));
  EXPECT_EQ(RefusalFor(job[1], set),
            "-1 rank 1 sent the NCCL unique id of device group 0 of process set " +
                std::to_string(set) + ", which has no device groups yet");
  ExpectPath(job.Allreduce(set, {1, 2},
                           {Allreduce("s", kCuda, 1, Uuid('b')), Allreduce("s", kCuda, 0, Uuid('c'))}),
             wire::DEVICE_PATH_NCCL, 0);
  job[1].Send(Encoded(CommIdFrame(set, 0, "set id")));
  wire::Frame relayed;
  ASSERT_TRUE(job[2].Receive(&relayed) && relayed.has_comm_id()) << relayed.DebugString();
  EXPECT_EQ(relayed.comm_id().set_id(), set);
  EXPECT_EQ(relayed.comm_id().id(), "set id");
  EXPECT_TRUE(Silent(job[0]));
  EXPECT_TRUE(Silent(job[1]));
  job[0].Send(Encoded(CommIdFrame(set, 0, "outsider")));
  EXPECT_EQ(RefusalFor(job[0], set),
            "-3 rank 0 sent the NCCL unique id of process set " + std::to_string(set) +
                ", which it is not a member of");
  job.RemoveSet(set, {1, 2});
  job[1].Send(Encoded(CommIdFrame(set, 0, "late")));
  EXPECT_EQ(RefusalFor(job[1], set), "-2 cannot relay rank 1's NCCL unique id: process set " +
                                         std::to_string(set) + " was removed");
  EXPECT_TRUE(Silent(job[2]));
}

TEST(CommIdRelay, ItIsRefusedFromOtherMembersForUnknownSetsAndOfBadSizes) {
  Tuttid tuttid({"--lease-ms", "60000"});
  RawJob job(tuttid, "refusals", {"h1/b/n", "h2/b/n", "h3/b/n"});
  ExpectPath(job.Allreduce(0, {0, 1, 2},
                           {Allreduce("g", kCuda, 0, Uuid('a')), Allreduce("g", kCuda, 0, Uuid('b')),
                            Allreduce("g", kCuda, 0, Uuid('c'))}),
             wire::DEVICE_PATH_NCCL, 0);
  job[1].Send(Encoded(CommIdFrame(0, 0, std::string(128, 'x'))));
  EXPECT_EQ(RefusalFor(job[1], 0),
            "-1 rank 1 sent the NCCL unique id of process set 0, but only its first member (rank 0) "
            "generates it");
  job[0].Send(Encoded(CommIdFrame(9, 0, std::string(128, 'x'))));
  EXPECT_EQ(RefusalFor(job[0], 9),
            "-2 cannot relay rank 0's NCCL unique id: process set 9 does not exist");
  job[0].Send(Encoded(CommIdFrame(0, 0, std::string(513, 'x'))));
  EXPECT_EQ(RefusalFor(job[0], 0),
            "-1 rank 0 sent an NCCL unique id of 513 bytes for process set 0; it must have 1 to "
            "512 bytes");
  job[0].Send(Encoded(CommIdFrame(0, 0, "")));
  EXPECT_EQ(RefusalFor(job[0], 0),
            "-1 rank 0 sent an NCCL unique id of 0 bytes for process set 0; it must have 1 to 512 "
            "bytes");
  job[0].Send(Encoded(CommIdFrame(0, -1, "x")));
  EXPECT_EQ(RefusalFor(job[0], 0),
            "-1 rank 0 sent the NCCL unique id of device group -1 of process set 0, which has "
            "device groups 0 to 0");
  job[0].Send(Encoded(CommIdFrame(0, 1, "x")));
  EXPECT_EQ(RefusalFor(job[0], 0),
            "-1 rank 0 sent the NCCL unique id of device group 1 of process set 0, which has "
            "device groups 0 to 0");
  // None of it reached the others; the largest id does.
  EXPECT_TRUE(Silent(job[1]));
  EXPECT_TRUE(Silent(job[2]));
  job[0].Send(Encoded(CommIdFrame(0, 0, std::string(512, 'y'))));
  for (int r : {1, 2}) {
    wire::Frame frame;
    ASSERT_TRUE(job[r].Receive(&frame) && frame.has_comm_id()) << frame.DebugString();
    EXPECT_EQ(frame.comm_id().id(), std::string(512, 'y'));
  }
}

}  // namespace
}  // namespace tutti::testing
