// Device collectives on machines without a GPU, through the simulated GPU module
// (tests/gpu_sim/sim_module.cc: host memory for device memory, asynchronous streams, NCCL
// simulated between processes) loaded in place of the real one with TUTTI_GPU_MODULE: tuttid's
// path decision, the staged path end to end with device results, stream waits, and the NCCL
// unique-id relay feeding one communicator. Ranks live in this process (explicit handles allow
// several) against a real tuttid; tests/python/test_nccl_sim.py runs ranks as processes.
#include <tutti/tutti.h>

#include <cstdlib>
#include <future>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "gpu_sim/sim_hooks.h"
#include "multiproc/in_process_job.h"

namespace tutti::testing {
namespace {

std::string LastError() { return tutti_last_error(); }

// A float32 tensor on (simulated) cuda:`device`, or on the host with device < 0.
struct Tensor {
  Tensor(int64_t rows, int device) : values(rows), shape{rows} {
    desc.data = values.data();
    desc.dtype = TUTTI_DTYPE_FLOAT32;
    desc.ndim = 1;
    desc.shape = shape.data();
    if (device >= 0) {
      desc.device_type = TUTTI_DEVICE_CUDA;
      desc.device_index = device;
    }
  }
  std::vector<float> values;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
};

std::vector<float> OutputOf(tutti_request_t request, int32_t expected_device_type) {
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  EXPECT_EQ(tutti_request_output(request, &out), TUTTI_OK) << LastError();
  EXPECT_EQ(out.device_type, expected_device_type);
  const auto* data = static_cast<const float*>(out.data);
  return std::vector<float>(data, data + (out.ndim ? out.shape[0] : 0));
}

TEST(GpuSim, TheSimulatedModuleIsTheOneLoaded) {
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CUDA, 1), TUTTI_OK) << LastError();
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CUDA, 2), TUTTI_ERR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(LastError(), "CUDA device 2 does not exist: this process sees 2 (CUDA_VISIBLE_DEVICES renumbers them from 0)");
  int32_t nccl = -1;
  EXPECT_EQ(tutti_nccl_version(&nccl), TUTTI_OK) << LastError();
  EXPECT_EQ(nccl, 0);  // the simulator runs without NCCL
  EXPECT_EQ(tutti_nccl_version(nullptr), TUTTI_ERR_INVALID_ARGUMENT);
}

// Two ranks on one GPU: tuttid stages the set through host memory; every kind works, fused or
// not, and results the library allocates are device memory (the module's).
TEST(GpuSim, RanksSharingOneGpuGoThroughStaging) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, 30000);
  // Three allreduces released together: fused through the staging buffer; average and scales.
  std::vector<std::vector<Tensor>> grads(2);
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = TUTTI_OP_AVERAGE;
  options.postscale_factor = 2.0;
  std::vector<tutti_request_t> requests;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k) {
      grads[r].emplace_back(100 + k, 0);
    }
    for (int k = 0; k < 3; ++k) {
      auto& t = grads[r][k];
      for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = static_cast<float>((r + 1) * (i + k));
      const std::string name = "g" + std::to_string(k);
      tutti_request_t request;
      ASSERT_EQ(tutti_allreduce(job[r], name.c_str(), TUTTI_WORLD, &t.desc, &t.desc, &options, &request), TUTTI_OK)
          << LastError();
      requests.push_back(request);
    }
  }
  for (auto request : requests) {
    EXPECT_EQ(tutti_request_stream_wait(request, nullptr, 30000), TUTTI_OK) << LastError();
    EXPECT_EQ(tutti_request_wait(request, 30000), TUTTI_OK) << LastError();
    tutti_request_free(request);
  }
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k)
      for (size_t i = 0; i < grads[r][k].values.size(); ++i)
        ASSERT_EQ(grads[r][k].values[i], 3.0f * (i + k)) << r << " " << k << " " << i;  // (1+2)/2 * 2

  // A group is released whole and fused: the staged path's fused host collective.
  {
    std::vector<std::vector<Tensor>> group(2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 4; ++k) group[r].emplace_back(10 + k, 0);
      std::vector<tutti_tensor_t> descs;
      for (int k = 0; k < 4; ++k) {
        for (size_t i = 0; i < group[r][k].values.size(); ++i) group[r][k].values[i] = static_cast<float>(r + k + i);
        descs.push_back(group[r][k].desc);
      }
      tutti_request_t request;
      ASSERT_EQ(tutti_grouped_allreduce(job[r], "fused", TUTTI_WORLD, 4, descs.data(), descs.data(), nullptr,
                                        &request), TUTTI_OK) << LastError();
      requests[r] = request;
    }
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(tutti_request_wait(requests[r], 30000), TUTTI_OK) << LastError();
      tutti_request_free(requests[r]);
    }
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 4; ++k)
        for (size_t i = 0; i < group[r][k].values.size(); ++i)
          ASSERT_EQ(group[r][k].values[i], static_cast<float>(1 + 2 * (k + i))) << r << " " << k << " " << i;
  }

  // Allgather of uneven rows, reducescatter and alltoall: device results.
  Tensor a0(1, 0), a1(2, 0);
  a0.values = {5};
  a1.values = {6, 7};
  tutti_request_t g[2];
  ASSERT_EQ(tutti_allgather(job[0], "rows", TUTTI_WORLD, &a0.desc, &g[0]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_allgather(job[1], "rows", TUTTI_WORLD, &a1.desc, &g[1]), TUTTI_OK) << LastError();
  for (auto request : g) {
    ASSERT_EQ(tutti_request_wait(request, 30000), TUTTI_OK) << LastError();
    EXPECT_EQ(OutputOf(request, TUTTI_DEVICE_CUDA), (std::vector<float>{5, 6, 7}));
    tutti_request_free(request);
  }
  Tensor s0(4, 0), s1(4, 0);
  s0.values = {1, 2, 3, 4};
  s1.values = {10, 20, 30, 40};
  ASSERT_EQ(tutti_reducescatter(job[0], "rs", TUTTI_WORLD, &s0.desc, nullptr, &g[0]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_reducescatter(job[1], "rs", TUTTI_WORLD, &s1.desc, nullptr, &g[1]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_request_wait(g[0], 30000), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_request_wait(g[1], 30000), TUTTI_OK) << LastError();
  EXPECT_EQ(OutputOf(g[0], TUTTI_DEVICE_CUDA), (std::vector<float>{11, 22}));
  EXPECT_EQ(OutputOf(g[1], TUTTI_DEVICE_CUDA), (std::vector<float>{33, 44}));
  for (auto request : g) tutti_request_free(request);
  ASSERT_EQ(tutti_alltoall(job[0], "a2a", TUTTI_WORLD, &s0.desc, nullptr, 0, &g[0]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_alltoall(job[1], "a2a", TUTTI_WORLD, &s1.desc, nullptr, 0, &g[1]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_request_wait(g[0], 30000), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_request_wait(g[1], 30000), TUTTI_OK) << LastError();
  EXPECT_EQ(OutputOf(g[0], TUTTI_DEVICE_CUDA), (std::vector<float>{1, 2, 10, 20}));
  EXPECT_EQ(OutputOf(g[1], TUTTI_DEVICE_CUDA), (std::vector<float>{3, 4, 30, 40}));
  for (auto request : g) tutti_request_free(request);

  // Broadcast in place from rank 1.
  s0.values = {0, 0, 0, 0};
  ASSERT_EQ(tutti_broadcast(job[0], "b", TUTTI_WORLD, &s0.desc, 1, &g[0]), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_broadcast(job[1], "b", TUTTI_WORLD, &s1.desc, 1, &g[1]), TUTTI_OK) << LastError();
  for (auto request : g) {
    ASSERT_EQ(tutti_request_wait(request, 30000), TUTTI_OK) << LastError();
    tutti_request_free(request);
  }
  EXPECT_EQ(s0.values, (std::vector<float>{10, 20, 30, 40}));
}

// One member's tensor on the host, the other's on a GPU under one name: refused on every member
// with one message naming both (Horovod: "Mismatched ... CPU/GPU device selection"), and the
// members go on to their next collective.
TEST(GpuSim, HostAndDeviceMembersUnderOneNameAreRefusedOnEveryMember) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, 30000);
  Tensor host(2, -1), device(2, 1);
  tutti_request_t g[2];
  ASSERT_EQ(tutti_allreduce(job[0], "mix", TUTTI_WORLD, &host.desc, &host.desc, nullptr, &g[0]), TUTTI_OK)
      << LastError();
  ASSERT_EQ(tutti_allreduce(job[1], "mix", TUTTI_WORLD, &device.desc, &device.desc, nullptr, &g[1]), TUTTI_OK)
      << LastError();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(tutti_request_wait(g[r], 30000), TUTTI_ERR_MISMATCH) << "rank " << r;
    EXPECT_EQ(LastError(),
              "mismatched CPU/GPU device selection for 'mix' on process set 0: rank 0 has it on the "
              "CPU, rank 1 on cuda:1; every member's tensor must be on the CPU, or every member's "
              "on a GPU")
        << "rank " << r;
    tutti_request_free(g[r]);
  }
  Tensor a(2, -1), b(2, -1);
  a.values = {1, 2};
  b.values = {3, 4};
  ASSERT_EQ(tutti_allreduce(job[0], "next", TUTTI_WORLD, &a.desc, &a.desc, nullptr, &g[0]), TUTTI_OK);
  ASSERT_EQ(tutti_allreduce(job[1], "next", TUTTI_WORLD, &b.desc, &b.desc, nullptr, &g[1]), TUTTI_OK);
  for (auto request : g) {
    EXPECT_EQ(tutti_request_wait(request, 30000), TUTTI_OK) << LastError();
    tutti_request_free(request);
  }
  EXPECT_EQ(a.values, (std::vector<float>{4, 6}));
}

// A grouped call whose tensors are on different devices is the caller's mistake, refused at once
// (Horovod raises; tutti.torch raises a RuntimeError that is also a ValueError).
TEST(GpuSim, AGroupMixingDevicesIsRefusedAtSubmission) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 1, 30000);
  Tensor host(2, -1), device(2, 0);
  tutti_tensor_t descs[] = {host.desc, device.desc};
  tutti_request_t request = nullptr;
  EXPECT_EQ(tutti_grouped_allreduce(job[0], "g", TUTTI_WORLD, 2, descs, descs, nullptr, &request),
            TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "grouped allreduce 'g': all tensors of a group must be on one device: "
                         "tensor 0 is on cpu, tensor 1 on cuda:0");
  EXPECT_EQ(tutti_grouped_allgather(job[0], "h", TUTTI_WORLD, 2, descs, &request), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "grouped allgather 'h': all tensors of a group must be on one device: "
                         "tensor 0 is on cpu, tensor 1 on cuda:0");
}

// Each member on a GPU of its own: tuttid picks NCCL; the first member makes the unique id,
// tuttid relays it, and both members join one (simulated) communicator with it, which then
// serves every later collective of that set and device combination.
TEST(GpuSim, NcclUniqueIdReachesEveryMemberThroughTuttid) {
  auto hooks = SimHooks::Of(TUTTI_SIM_MODULE_PATH);
  const int64_t before = hooks.communicators_created();
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, 30000);
  Tensor t0(8, 0), t1(8, 1);
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 8; ++i) {
      t0.values[i] = static_cast<float>(i + step);
      t1.values[i] = static_cast<float>(10 * i);
    }
    tutti_request_t r[2];
    const std::string name = "nccl." + std::to_string(step);
    ASSERT_EQ(tutti_allreduce(job[0], name.c_str(), TUTTI_WORLD, &t0.desc, &t0.desc, nullptr, &r[0]), TUTTI_OK) << LastError();
    ASSERT_EQ(tutti_allreduce(job[1], name.c_str(), TUTTI_WORLD, &t1.desc, &t1.desc, nullptr, &r[1]), TUTTI_OK) << LastError();
    for (auto request : r) {
      EXPECT_EQ(tutti_request_wait(request, 30000), TUTTI_OK) << LastError();
      tutti_request_free(request);
    }
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(t0.values[i], static_cast<float>(11 * i + step)) << step;
      EXPECT_EQ(t1.values[i], t0.values[i]) << step;
    }
  }
  // One communicator, joined by each of the two ranks living in this process, for all three.
  EXPECT_EQ(hooks.communicators_created() - before, 2);
}

}  // namespace
}  // namespace tutti::testing

int main(int argc, char** argv) {
  // Before anything loads a GPU module: the simulated one, built next to this test.
  setenv("TUTTI_GPU_MODULE", TUTTI_SIM_MODULE_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
