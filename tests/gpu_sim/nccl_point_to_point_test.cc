// Send and recv of device tensors on the simulated NCCL path (client/exec/point_to_point_nccl.h):
// ranks on different simulated GPUs send over a communicator of their pair, made once per
// direction and pair of devices; ranks sharing GPU 0, a recv posted after its message arrived, a
// host recv and a module without NCCL point-to-point stay staged; a sender that dies while the
// receiver waits on the communicator ends that wait with the peer-lost status. The receiver reads
// the bytes once its stream ran, after tutti_request_stream_wait, as PyTorch does.
#include <tutti/tutti.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/kernels/half.h"
#include "gpu_sim/sim_hooks.h"
#include "gpu_sim/sim_tensor.h"
#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"
#include "multiproc/process.h"

namespace tutti::testing {
namespace {

constexpr int64_t kWaitMs = 60000;
constexpr int64_t kCount = 3000;

std::string LastError() { return tutti_last_error(); }

// Element i of a tensor of `dtype` holds a value of that type that differs from its neighbours'.
void Fill(DeviceTensor& t, int seed) {
  const int32_t dtype = t.desc.dtype;
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    char* at = t.bytes.data() + i * SizeOf(dtype);
    const double v = static_cast<double>((i * 7 + seed) % 251) - 100.0;
    switch (dtype) {
      case TUTTI_DTYPE_FLOAT16: { uint16_t h = FloatToHalf(static_cast<float>(v) / 4); std::memcpy(at, &h, 2); break; }
      case TUTTI_DTYPE_FLOAT32: { float f = static_cast<float>(v) / 3; std::memcpy(at, &f, 4); break; }
      case TUTTI_DTYPE_INT64: { int64_t n = static_cast<int64_t>(v) * (int64_t{1} << 40); std::memcpy(at, &n, 8); break; }
      case TUTTI_DTYPE_BOOL: *at = (i + seed) % 3 == 0; break;
    }
  }
}

class NcclPointToPoint : public ::testing::Test {
 protected:
  void SetUp() override {
    hooks_ = SimHooks::Of(TUTTI_SIM_MODULE_PATH);
    stream_ = hooks_.stream_create(0);
  }
  void TearDown() override { hooks_.stream_destroy(stream_); }

  // Rank `from`'s tensor on `from_device` to rank `to`'s on `to_device` (either < 0: host), tag
  // `tag`, the recv posted first or after the send completed; expects the bytes on arrival.
  void Exchange(InProcessJob& job, int from, int from_device, int to, int to_device, int32_t dtype,
                int tag, bool recv_first) {
    DeviceTensor sent(dtype, {kCount}, from_device), received(dtype, {kCount}, to_device);
    Fill(sent, tag);
    tutti_request_t send = nullptr, recv = nullptr;
    if (recv_first) {
      ASSERT_EQ(tutti_recv(job[to], TUTTI_WORLD, &received.desc, from, tag, &recv), TUTTI_OK) << LastError();
    }
    ASSERT_EQ(tutti_send(job[from], TUTTI_WORLD, &sent.desc, to, tag, &send), TUTTI_OK) << LastError();
    if (!recv_first) {
      ASSERT_EQ(tutti_request_wait(send, kWaitMs), TUTTI_OK) << LastError();
      ASSERT_EQ(tutti_recv(job[to], TUTTI_WORLD, &received.desc, from, tag, &recv), TUTTI_OK) << LastError();
    }
    if (to_device >= 0) {
      ASSERT_EQ(tutti_request_stream_wait(recv, stream_, kWaitMs), TUTTI_OK) << LastError();
      ASSERT_EQ(hooks_.stream_synchronize(stream_), 0);
    } else {
      ASSERT_EQ(tutti_request_wait(recv, kWaitMs), TUTTI_OK) << LastError();
    }
    EXPECT_EQ(received.bytes, sent.bytes) << "dtype " << dtype << ", tag " << tag;
    EXPECT_EQ(tutti_request_wait(recv, kWaitMs), TUTTI_OK) << LastError();
    EXPECT_EQ(tutti_request_wait(send, kWaitMs), TUTTI_OK) << LastError();
    tutti_request_free(send);
    tutti_request_free(recv);
  }

  int64_t Made() { return hooks_.communicators_created(); }

  SimHooks hooks_{};
  void* stream_ = nullptr;
};

TEST_F(NcclPointToPoint, RanksOnTheirOwnGpusSendOverOneCommunicatorPerDirection) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, kWaitMs);
  const int64_t before = Made();
  // Rank 0 on cuda:1 to rank 1 on cuda:0, every kind of element.
  int tag = 0;
  for (int32_t dtype : {TUTTI_DTYPE_FLOAT16, TUTTI_DTYPE_FLOAT32, TUTTI_DTYPE_INT64, TUTTI_DTYPE_BOOL})
    Exchange(job, 0, 1, 1, 0, dtype, ++tag, /*recv_first=*/true);
  // One communicator for the pair's devices, joined by both ranks (both live in this process).
  EXPECT_EQ(Made() - before, 2);
  // The other direction is a channel of its own, with its own pair communicator.
  Exchange(job, 1, 0, 0, 1, TUTTI_DTYPE_FLOAT32, 1, true);
  Exchange(job, 1, 0, 0, 1, TUTTI_DTYPE_FLOAT32, 2, true);
  EXPECT_EQ(Made() - before, 4);
  // Staged, on the same channels and without a communicator: a recv posted after its message
  // arrived (the offer was answered at once), and a recv into host memory.
  Exchange(job, 0, 1, 1, 0, TUTTI_DTYPE_FLOAT32, 9, /*recv_first=*/false);
  Exchange(job, 0, 1, 1, -1, TUTTI_DTYPE_FLOAT32, 10, true);
  // And the NCCL path still right after them.
  Exchange(job, 0, 1, 1, 0, TUTTI_DTYPE_INT64, 11, true);
  EXPECT_EQ(Made() - before, 4);
}

TEST_F(NcclPointToPoint, RanksSharingGpu0Stage) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, kWaitMs);
  const int64_t before = Made();
  Exchange(job, 0, 0, 1, 0, TUTTI_DTYPE_FLOAT32, 1, true);
  Exchange(job, 1, 0, 0, 0, TUTTI_DTYPE_FLOAT16, 2, true);
  EXPECT_EQ(Made() - before, 0);
}

TEST_F(NcclPointToPoint, AModuleWithoutNcclPointToPointStages) {
  setenv("TUTTI_SIM_NCCL_P2P", "0", 1);
  {
    Tuttid tuttid;
    InProcessJob job(tuttid, 2, kWaitMs);
    const int64_t before = Made();
    Exchange(job, 0, 1, 1, 0, TUTTI_DTYPE_FLOAT32, 1, true);
    EXPECT_EQ(Made() - before, 0);
  }
  unsetenv("TUTTI_SIM_NCCL_P2P");
}

// Rank 0, a process of its own (tests/gpu_sim/p2p_lost_sender.cc), sends from cuda:1 with its
// simulated GPU held, so that the NCCL transfer never runs; this process's rank 1 waits on the
// pair's communicator until rank 0 is killed, and then fails with the loss tuttid reports.
TEST_F(NcclPointToPoint, ALostSenderEndsTheRecvWaitingOnTheCommunicatorWithPeerLost) {
  Tuttid tuttid;
  const std::string job = UniqueJobId();
  Process sender({TUTTI_SIM_P2P_SENDER_PATH},
                 {{"TUTTI_COORDINATOR", tuttid.endpoint()}, {"TUTTI_JOB", job}, {"TUTTI_TOKEN", "t"},
                  {"TUTTI_RANK", "0"}, {"TUTTI_SIZE", "2"}, {"TUTTI_TIMEOUT_MS", std::to_string(kWaitMs)},
                  {"TUTTI_GPU_MODULE", TUTTI_SIM_MODULE_PATH}});
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.coordinator = tuttid.endpoint().c_str();
  options.job = job.c_str();
  options.token = "t";
  options.rank = 1;
  options.size = 2;
  options.timeout_ms = kWaitMs;
  tutti_runtime_t rt = nullptr;
  ASSERT_EQ(tutti_init(&options, &rt), TUTTI_OK) << LastError();
  ASSERT_TRUE(sender.ReadUntil("ready", In(60))) << sender.transcript();
  const int64_t before = Made();
  DeviceTensor received(TUTTI_DTYPE_FLOAT32, {1024}, 0);
  tutti_request_t recv = nullptr;
  ASSERT_EQ(tutti_recv(rt, TUTTI_WORLD, &received.desc, 0, 5, &recv), TUTTI_OK) << LastError();
  sender.WriteLine("go");
  ASSERT_TRUE(sender.ReadUntil("sent", In(60))) << sender.transcript();
  // Published: the recv is queued on the pair's new communicator (a staged recv could not be,
  // its bytes never leave the held GPU), and waits there.
  ASSERT_EQ(tutti_request_stream_wait(recv, stream_, kWaitMs), TUTTI_OK) << LastError();
  EXPECT_EQ(Made() - before, 1);
  EXPECT_EQ(tutti_request_test(recv), TUTTI_IN_PROGRESS);
  sender.Signal(SIGKILL);
  const auto killed = Clock::now();
  EXPECT_EQ(tutti_request_wait(recv, kWaitMs), TUTTI_ERR_PEER_LOST);
  EXPECT_EQ(LastError(), "peer lost: rank 0: its control connection to tuttid closed");
  EXPECT_LE(Clock::now() - killed, std::chrono::seconds(10));
  tutti_request_free(recv);
  ASSERT_EQ(hooks_.stream_synchronize(stream_), 0);  // the aborted transfer ended its stream's wait
  tutti_finalize(rt);
}

}  // namespace
}  // namespace tutti::testing
