// The coordinator's half of GPU support: members may announce tensors on different devices, and
// every released response says how it runs (host transports, NCCL, or staged through host memory)
// and on which of the set's device combinations (docs/wire-protocol.md, "Device paths").
#include <memory>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "server/core/negotiator.h"
#include "unit/test_specs.h"

namespace tutti::server {
namespace {

constexpr int32_t kCpu = 0, kCuda = 1;

// A 16-byte GPU uuid whose bytes are all `fill`.
std::string Uuid(char fill) { return std::string(16, fill); }

wire::TensorSpec On(wire::TensorSpec spec, int32_t type, int32_t index, std::string uuid = "") {
  spec.set_device_type(type);
  spec.set_device_index(index);
  spec.set_device_uuid(std::move(uuid));
  return spec;
}

// Announces `specs[i]` from members[i] (in order) and returns the one response they release.
wire::Response Negotiate(Negotiator& n, const std::vector<wire::TensorSpec>& specs) {
  std::vector<wire::Response> ready;
  for (size_t i = 0; i < specs.size(); ++i) {
    Status status = n.Announce(n.members()[i], specs[i], &ready);
    EXPECT_TRUE(status.ok()) << status.message();
  }
  EXPECT_EQ(ready.size(), 1u);
  return ready.empty() ? wire::Response() : ready[0];
}

// Captures what the negotiator logs while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_st>(stream_));
    logger->set_pattern("%l %v");
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Horovod's rule: one name on the CPU on some members and on a GPU on others is refused, for every
// member with one message naming the first two members that differ (tutti once staged it).
TEST(DevicePath, HostAndDeviceTensorsUnderOneNameAreAMismatchNamingTheRanksAndDevices) {
  Negotiator n(1, {0, 1, 2});
  const auto g = Spec("g", 4);
  const auto r = Negotiate(n, {On(g, kCuda, 0, Uuid('a')), On(g, kCuda, 3), On(g, kCpu, 0)});
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(static_cast<Code>(r.error().code()), Code::kMismatch);
  EXPECT_EQ(r.error().message(),
            "mismatched CPU/GPU device selection for 'g' on process set 1: rank 0 has it on "
            "cuda:0, rank 2 on the CPU; every member's tensor must be on the CPU, or every "
            "member's on a GPU");
  EXPECT_EQ(n.device_groups(), 0u);
  // Other fields still must agree, and the message still names the devices.
  std::vector<wire::Response> ready;
  ASSERT_TRUE(n.Announce(0, On(Spec("h", 4), kCuda, 1, Uuid('a')), &ready).ok());
  ASSERT_TRUE(n.Announce(1, On(Spec("h", 5), kCuda, 2, Uuid('b')), &ready).ok());
  ASSERT_TRUE(n.Announce(2, On(Spec("h", 4), kCpu, 0), &ready).ok());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].error().message(),
            "mismatched 'h' on process set 1: rank 0 sent allreduce float32[4] op=sum "
            "device=cuda:1, rank 1 sent allreduce float32[5] op=sum device=cuda:2");
}

TEST(DevicePath, HostTensorsEverywhereRunOnTheHostInGroupZero) {
  Negotiator n(0, {0, 1});
  const auto r = Negotiate(n, {On(Spec("g", 4), kCpu, 0), On(Spec("g", 4), kCpu, 0)});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_HOST);
  EXPECT_EQ(r.device_group(), 0);
  EXPECT_EQ(n.device_groups(), 0u);  // host memory takes no device group
}

TEST(DevicePath, OwnGpuPerMemberRunsNccl) {
  Negotiator n(2, {0, 1, 2, 3}, 0, {"h1/boot/ns", "h1/boot/ns", "h2/boot/ns", "h2/boot/ns"});
  const auto g = Spec("g", 4);
  // Each process sees its GPU as cuda:0; the uuids tell them apart.
  const auto r = Negotiate(n, {On(g, kCuda, 0, Uuid('a')), On(g, kCuda, 0, Uuid('b')),
                               On(g, kCuda, 0, Uuid('c')), On(g, kCuda, 0, Uuid('d'))});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_NCCL);
  EXPECT_EQ(r.device_group(), 0);
}

TEST(DevicePath, EqualUuidsOnDifferentHostsAreDifferentGpus) {
  Negotiator n(2, {0, 1}, 0, {"h1/boot/ns", "h2/boot/ns"});
  const auto g = Spec("g", 4);
  EXPECT_EQ(Negotiate(n, {On(g, kCuda, 0, Uuid('a')), On(g, kCuda, 0, Uuid('a'))}).device_path(),
            wire::DEVICE_PATH_NCCL);
}

TEST(DevicePath, MembersSharingAGpuByUuidAreStagedWithOneWarning) {
  LogCapture log;
  Negotiator n(3, {0, 1, 2}, 0, {"h1/boot/ns", "h1/boot/ns", "h1/boot/ns"});
  n.set_job("train");
  const auto g = Spec("grad.w", 4);
  // Different indices (other CUDA_VISIBLE_DEVICES), one GPU.
  std::string uuid = Uuid('\0');
  uuid[0] = '\x8f';
  uuid[15] = '\x01';
  const std::vector<wire::TensorSpec> specs = {On(g, kCuda, 0, uuid), On(g, kCuda, 1, Uuid('b')),
                                               On(g, kCuda, 2, uuid)};
  const auto r = Negotiate(n, specs);
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_STAGED);
  EXPECT_EQ(r.device_group(), 0);
  const std::string warning =
      "warning job 'train': process set 3: 'grad.w' runs staged through host memory: ranks 0 and 2 "
      "share GPU GPU-8f000000-0000-0000-0000-000000000001 on host h1 (device group 0)\n";
  EXPECT_EQ(log.text(), warning);
  // The same combination again: the same group, no second warning.
  auto again = specs;
  for (auto& s : again) s.set_name("grad.b");
  const auto r2 = Negotiate(n, again);
  EXPECT_EQ(r2.device_path(), wire::DEVICE_PATH_STAGED);
  EXPECT_EQ(r2.device_group(), 0);
  EXPECT_EQ(log.text(), warning);
}

TEST(DevicePath, WithoutUuidsEqualIndicesOnOneHostShareAGpu) {
  LogCapture log;
  Negotiator n(4, {0, 1, 2}, 0, {"h1/boot/ns", "h2/boot/ns", "h1/boot/ns"});
  const auto g = Spec("g", 4);
  // Ranks 0 and 2 on h1 both on cuda:0; rank 1 on cuda:0 of another host.
  auto r = Negotiate(n, {On(g, kCuda, 0), On(g, kCuda, 0), On(g, kCuda, 0)});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_STAGED);
  EXPECT_EQ(log.text(),
            "warning process set 4: 'g' runs staged through host memory: ranks 0 and 2 share GPU "
            "cuda:0 on host h1 (device group 0)\n");
  // cuda:0 and cuda:1 on h1: their own GPUs.
  r = Negotiate(n, {On(Spec("h", 4), kCuda, 0), On(Spec("h", 4), kCuda, 0),
                    On(Spec("h", 4), kCuda, 1)});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_NCCL);
  EXPECT_EQ(r.device_group(), 1);
  // One uuid missing: the indices decide.
  r = Negotiate(n, {On(Spec("i", 4), kCuda, 1, Uuid('a')), On(Spec("i", 4), kCuda, 0),
                    On(Spec("i", 4), kCuda, 1)});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_STAGED);
  EXPECT_EQ(r.device_group(), 2);
}

TEST(DevicePath, AJoinedMemberStagesDeviceTensorsButNotHostOnes) {
  LogCapture log;
  Negotiator n(0, {0, 1, 2});
  std::vector<wire::Response> ready;
  int32_t last = -1;
  EXPECT_FALSE(n.Join(1, &ready, &last));
  ASSERT_TRUE(n.Announce(0, On(Spec("host", 4), kCpu, 0), &ready).ok());
  ASSERT_TRUE(n.Announce(2, On(Spec("host", 4), kCpu, 0), &ready).ok());
  ASSERT_TRUE(n.Announce(0, On(Spec("dev", 4), kCuda, 0, Uuid('a')), &ready).ok());
  ASSERT_TRUE(n.Announce(2, On(Spec("dev", 4), kCuda, 0, Uuid('b')), &ready).ok());
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_TRUE(ready[0].partial());
  EXPECT_EQ(ready[0].device_path(), wire::DEVICE_PATH_HOST);
  EXPECT_TRUE(ready[1].partial());
  EXPECT_EQ(ready[1].device_path(), wire::DEVICE_PATH_STAGED);
  EXPECT_EQ(ready[1].device_group(), 0);
  EXPECT_EQ(log.text(),
            "warning process set 0: 'dev' runs staged through host memory: rank 1 has joined, and "
            "its share is built in host memory (device group 0)\n");
}

TEST(DevicePath, GroupsAreNumberedInFirstSeenOrderAndStable) {
  Negotiator n(6, {0, 1});
  auto combo = [](const std::string& name, char a, char b) {
    return std::vector<wire::TensorSpec>{On(Spec(name, 4), kCuda, 0, Uuid(a)),
                                         On(Spec(name, 4), kCuda, 0, Uuid(b))};
  };
  EXPECT_EQ(Negotiate(n, combo("x", 'a', 'b')).device_group(), 0);
  EXPECT_EQ(Negotiate(n, combo("y", 'c', 'd')).device_group(), 1);
  EXPECT_EQ(Negotiate(n, combo("z", 'a', 'b')).device_group(), 0);
  // The same GPUs in the other order are another combination (ranks map to other devices).
  EXPECT_EQ(Negotiate(n, combo("w", 'b', 'a')).device_group(), 2);
  EXPECT_EQ(Negotiate(n, combo("v", 'c', 'd')).device_group(), 1);
  // A barrier moves no tensor.
  wire::TensorSpec barrier;
  barrier.set_name("b");
  barrier.set_kind(wire::COLLECTIVE_BARRIER);
  const auto r = Negotiate(n, {On(barrier, kCuda, 0, Uuid('a')), On(barrier, kCuda, 0, Uuid('b'))});
  EXPECT_EQ(r.device_path(), wire::DEVICE_PATH_HOST);
  EXPECT_EQ(r.device_group(), 0);
  EXPECT_EQ(n.device_groups(), 3u);
}

TEST(DevicePath, ASetUsesAtMost64DeviceCombinations) {
  Negotiator n(7, {0, 1});
  auto on_gpu = [](int i) {
    std::string uuid = Uuid('a');
    uuid[0] = static_cast<char>(i);
    const std::string name = "t" + std::to_string(i);
    return std::vector<wire::TensorSpec>{On(Spec(name, 4), kCuda, 0, Uuid('z')),
                                         On(Spec(name, 4), kCuda, 0, uuid)};
  };
  for (int i = 0; i < 64; ++i) {
    const auto r = Negotiate(n, on_gpu(i));
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(r.device_group(), i);
  }
  const auto refused = Negotiate(n, on_gpu(64));
  EXPECT_EQ(refused.error().code(), static_cast<int>(Code::kLimitExceeded));
  EXPECT_EQ(refused.error().message(),
            "limit exceeded: process set 7 may use at most 64 device combinations (which GPU, or "
            "host memory, each member's tensor is on); 't64' would be its 65th");
  EXPECT_EQ(n.device_groups(), 64u);
  // Known combinations and host tensors still run.
  auto known = on_gpu(5);
  for (auto& s : known) s.set_name("again");
  EXPECT_EQ(Negotiate(n, known).device_group(), 5);
  EXPECT_EQ(Negotiate(n, {Spec("host", 4), Spec("host", 4)}).device_path(), wire::DEVICE_PATH_HOST);
}

}  // namespace
}  // namespace tutti::server
