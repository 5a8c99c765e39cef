// Device tensors end to end on a real GPU: in-process ranks (explicit handles allow several per
// process) against a real tuttid. Every test skips with "no CUDA device" where none is usable, so
// the suite builds and runs everywhere the GPU module builds; tests/gpu/device_check.sh runs it
// on a machine with a GPU.
//
// What one GPU can show: the NCCL path with one rank (a 1-rank communicator still runs every
// kernel, the fusion buffer and the copies), the staged path with two ranks sharing the GPU,
// stream ordering and completion. Multi-rank NCCL, the id relay between processes and NCCL's
// peer-loss abort need two GPUs.
#include <cuda_runtime_api.h>
#include <tutti/tutti.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/kernels/half.h"
#include "gpu/test_kernels.h"
#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

namespace tutti::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string LastError() { return tutti_last_error(); }

#define SKIP_WITHOUT_GPU()                                                      \
  do {                                                                          \
    if (tutti_device_check(TUTTI_DEVICE_CUDA, 0) != TUTTI_OK)                   \
      GTEST_SKIP() << "no CUDA device (" << LastError() << ")";                 \
  } while (0)

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// A device buffer with a host mirror.
struct DeviceTensor {
  DeviceTensor(int32_t dtype, int64_t elements, size_t element_size)
      : bytes(static_cast<size_t>(elements) * element_size), shape{elements}, host(bytes) {
    EXPECT_EQ(cudaMalloc(&data, std::max<size_t>(bytes, 1)), cudaSuccess);
    desc.data = data;
    desc.dtype = dtype;
    desc.ndim = 1;
    desc.shape = shape.data();
    desc.device_type = TUTTI_DEVICE_CUDA;
    desc.device_index = 0;
  }
  ~DeviceTensor() { cudaFree(data); }
  void Upload() { EXPECT_EQ(cudaMemcpy(data, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess); }
  void Download() { EXPECT_EQ(cudaMemcpy(host.data(), data, bytes, cudaMemcpyDeviceToHost), cudaSuccess); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(host.data()); }

  void* data = nullptr;
  size_t bytes;
  std::vector<int64_t> shape;
  std::vector<char> host;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
};

// Every dtype, with its element size.
struct DtypeCase {
  int32_t dtype;
  const char* name;
  size_t size;
};
const DtypeCase kDtypes[] = {
    {TUTTI_DTYPE_FLOAT16, "float16", 2}, {TUTTI_DTYPE_BFLOAT16, "bfloat16", 2},
    {TUTTI_DTYPE_FLOAT32, "float32", 4}, {TUTTI_DTYPE_FLOAT64, "float64", 8},
    {TUTTI_DTYPE_INT8, "int8", 1},       {TUTTI_DTYPE_UINT8, "uint8", 1},
    {TUTTI_DTYPE_INT32, "int32", 4},     {TUTTI_DTYPE_INT64, "int64", 8},
    {TUTTI_DTYPE_INT16, "int16", 2},     {TUTTI_DTYPE_BOOL, "bool", 1},
};

void Put(DeviceTensor& t, int32_t dtype, size_t i, double v) {
  switch (dtype) {
    case TUTTI_DTYPE_FLOAT16: t.as<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)); break;
    case TUTTI_DTYPE_BFLOAT16: t.as<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case TUTTI_DTYPE_FLOAT32: t.as<float>()[i] = static_cast<float>(v); break;
    case TUTTI_DTYPE_FLOAT64: t.as<double>()[i] = v; break;
    case TUTTI_DTYPE_INT8: t.as<int8_t>()[i] = static_cast<int8_t>(v); break;
    case TUTTI_DTYPE_UINT8: t.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case TUTTI_DTYPE_INT32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case TUTTI_DTYPE_INT64: t.as<int64_t>()[i] = static_cast<int64_t>(v); break;
    case TUTTI_DTYPE_INT16: t.as<int16_t>()[i] = static_cast<int16_t>(v); break;
    case TUTTI_DTYPE_BOOL: t.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;  // any byte
  }
}

double Get(DeviceTensor& t, int32_t dtype, size_t i) {
  switch (dtype) {
    case TUTTI_DTYPE_FLOAT16: return HalfToFloat(t.as<uint16_t>()[i]);
    case TUTTI_DTYPE_BFLOAT16: return BFloat16ToFloat(t.as<uint16_t>()[i]);
    case TUTTI_DTYPE_FLOAT32: return t.as<float>()[i];
    case TUTTI_DTYPE_FLOAT64: return t.as<double>()[i];
    case TUTTI_DTYPE_INT8: return t.as<int8_t>()[i];
    case TUTTI_DTYPE_UINT8: return t.as<uint8_t>()[i];
    case TUTTI_DTYPE_INT32: return t.as<int32_t>()[i];
    case TUTTI_DTYPE_INT64: return t.as<int64_t>()[i];
    case TUTTI_DTYPE_INT16: return t.as<int16_t>()[i];
    case TUTTI_DTYPE_BOOL: return t.as<uint8_t>()[i];
  }
  return NAN;
}

bool Floating(int32_t dtype) { return dtype <= TUTTI_DTYPE_FLOAT64; }

// Every dtype and op through the NCCL path with one rank, fused: eight tensors of one dtype and
// op are submitted together so they share the device fusion buffer (one copy launch each way),
// with prescale and postscale folded into those copies (integers truncate after each). bool
// bytes of 2..49 come back as 1 (NCCL max/min on bytes, normalised in the copy out) and its
// average is refused; int16 reductions are refused, as NCCL has no 16-bit integer.
TEST(Gpu, FusedAllreduceEveryDtypeAndOpThroughNccl) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 1, 60000);
  const int32_t ops[] = {TUTTI_OP_SUM, TUTTI_OP_AVERAGE, TUTTI_OP_MIN, TUTTI_OP_MAX, TUTTI_OP_PRODUCT};
  for (const auto& d : kDtypes) {
    for (int32_t op : ops) {
      SCOPED_TRACE(std::string(d.name) + " op " + std::to_string(op));
      std::vector<std::unique_ptr<DeviceTensor>> tensors;
      std::vector<tutti_tensor_t> descs;
      tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
      options.reduce_op = op;
      if (Floating(d.dtype)) {
        options.prescale_factor = 4.0;
        options.postscale_factor = 0.5;
      } else if (d.dtype != TUTTI_DTYPE_BOOL) {
        options.prescale_factor = 0.5;  // (T)(x * 0.5), then (T)(that * 2): x rounded down to even
        options.postscale_factor = 2.0;
      }
      for (int k = 0; k < 8; ++k) {
        auto t = std::make_unique<DeviceTensor>(d.dtype, 1000 + 37 * k, d.size);
        for (size_t i = 0; i < static_cast<size_t>(t->shape[0]); ++i) Put(*t, d.dtype, i, static_cast<double>((i + k) % 50));
        t->Upload();
        descs.push_back(t->desc);
        tensors.push_back(std::move(t));
      }
      // A group is released whole, so its tensors always fuse (they fit the 1 MiB default).
      const std::string name = std::string("group.") + d.name + "." + std::to_string(op);
      tutti_request_t request;
      const tutti_status_t submitted = tutti_grouped_allreduce(
          job[0], name.c_str(), TUTTI_WORLD, 8, descs.data(), descs.data(), &options, &request);
      if (d.dtype == TUTTI_DTYPE_INT16) {
        ASSERT_EQ(submitted, TUTTI_ERR_UNSUPPORTED);
        EXPECT_EQ(LastError(), "allreduce '" + name + "[0]': int16 reductions of device tensors are not "
                               "supported (NCCL has no 16-bit integer type); reduce a host copy, or "
                               "the tensor as int32");
        continue;
      }
      if (d.dtype == TUTTI_DTYPE_BOOL && op == TUTTI_OP_AVERAGE) {
        ASSERT_EQ(submitted, TUTTI_ERR_INVALID_ARGUMENT);
        continue;
      }
      ASSERT_EQ(submitted, TUTTI_OK) << LastError();
      ASSERT_EQ(tutti_request_wait(request, 60000), TUTTI_OK) << LastError();
      tutti_request_free(request);
      // One rank: every op gives the input back, average included.
      auto expected = [&](double x) {
        if (Floating(d.dtype)) return 2.0 * x;  // 4 * 0.5
        if (d.dtype == TUTTI_DTYPE_BOOL) return x != 0 ? 1.0 : 0.0;
        return 2.0 * std::trunc(x * 0.5);
      };
      for (int k = 0; k < 8; ++k) {
        auto& t = *tensors[k];
        t.Download();
        for (size_t i = 0; i < static_cast<size_t>(t.shape[0]); i += 97)
          ASSERT_EQ(Get(t, d.dtype, i), expected(static_cast<double>((i + k) % 50)))
              << "tensor " << k << " [" << i << "]";
      }
    }
  }
  tutti_counters_t counters = TUTTI_COUNTERS_INIT;
  ASSERT_EQ(tutti_get_counters(job[0], &counters), TUTTI_OK);
  EXPECT_GT(counters.tensors_fused, 0u);
}

// Results tutti allocates for device tensors are device memory of the input's device.
TEST(Gpu, AllgatherReducescatterAndAlltoallResultsLiveOnTheDevice) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 1, 60000);
  DeviceTensor input(TUTTI_DTYPE_FLOAT32, 1024, 4);
  for (int i = 0; i < 1024; ++i) input.as<float>()[i] = static_cast<float>(i);
  input.Upload();
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);
    tutti_request_t request;
    tutti_status_t submitted = TUTTI_OK;
    if (kind == 0) submitted = tutti_allgather(job[0], "g", TUTTI_WORLD, &input.desc, &request);
    if (kind == 1) submitted = tutti_reducescatter(job[0], "r", TUTTI_WORLD, &input.desc, nullptr, &request);
    if (kind == 2) submitted = tutti_alltoall(job[0], "a", TUTTI_WORLD, &input.desc, nullptr, 0, &request);
    ASSERT_EQ(submitted, TUTTI_OK) << LastError();
    ASSERT_EQ(tutti_request_wait(request, 60000), TUTTI_OK) << LastError();
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    ASSERT_EQ(tutti_request_output(request, &out), TUTTI_OK);
    EXPECT_EQ(out.device_type, TUTTI_DEVICE_CUDA);
    EXPECT_EQ(out.device_index, 0);
    ASSERT_EQ(out.ndim, 1);
    ASSERT_EQ(out.shape[0], 1024);
    cudaPointerAttributes attributes;
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, out.data), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
    std::vector<float> back(1024);
    CUDA_OK(cudaMemcpy(back.data(), out.data, 4096, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 1024; ++i) ASSERT_EQ(back[i], static_cast<float>(i));
    tutti_request_free(request);
  }
}

// Two ranks on one GPU: NCCL refuses that, so tuttid sends the set through the staged path and
// the CPU transports; results as on the host path.
TEST(Gpu, TwoRanksSharingTheGpuGoThroughHostStaging) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, 60000);
  const int64_t n = 1 << 20;
  std::vector<std::unique_ptr<DeviceTensor>> grads;
  for (int r = 0; r < 2; ++r) {
    grads.push_back(std::make_unique<DeviceTensor>(TUTTI_DTYPE_FLOAT32, n, 4));
    for (int64_t i = 0; i < n; ++i) grads[r]->as<float>()[i] = static_cast<float>(r + 1) * (i % 7);
    grads[r]->Upload();
  }
  tutti_allreduce_options_t average = TUTTI_ALLREDUCE_OPTIONS_INIT;
  average.reduce_op = TUTTI_OP_AVERAGE;
  tutti_request_t requests[2];
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tutti_allreduce(job[r], "grad", TUTTI_WORLD, &grads[r]->desc, &grads[r]->desc, &average, &requests[r]),
              TUTTI_OK) << LastError();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(tutti_request_wait(requests[r], 60000), TUTTI_OK) << LastError();
    tutti_request_free(requests[r]);
    grads[r]->Download();
    for (int64_t i = 0; i < n; i += 1001) ASSERT_EQ(grads[r]->as<float>()[i], 1.5f * (i % 7)) << r << " " << i;
  }
  // Uneven allgather through staging: rank r contributes r + 1 rows.
  std::vector<std::unique_ptr<DeviceTensor>> parts;
  for (int r = 0; r < 2; ++r) {
    parts.push_back(std::make_unique<DeviceTensor>(TUTTI_DTYPE_INT64, r + 1, 8));
    for (int i = 0; i <= r; ++i) parts[r]->as<int64_t>()[i] = 10 * r + i;
    parts[r]->Upload();
    ASSERT_EQ(tutti_allgather(job[r], "rows", TUTTI_WORLD, &parts[r]->desc, &requests[r]), TUTTI_OK) << LastError();
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(tutti_request_wait(requests[r], 60000), TUTTI_OK) << LastError();
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    ASSERT_EQ(tutti_request_output(requests[r], &out), TUTTI_OK);
    ASSERT_EQ(out.shape[0], 3);
    EXPECT_EQ(out.device_type, TUTTI_DEVICE_CUDA);
    int64_t back[3];
    CUDA_OK(cudaMemcpy(back, out.data, sizeof back, cudaMemcpyDeviceToHost));
    EXPECT_EQ(back[0], 0);
    EXPECT_EQ(back[1], 10);
    EXPECT_EQ(back[2], 11);
    tutti_request_free(requests[r]);
  }
}

// The submit call returns while the producer's kernel still runs; the collective reads the
// tensor only after it; tutti_request_stream_wait orders a consumer stream after the result
// without the host waiting for the transfer.
TEST(Gpu, ProducerStreamOrderAndStreamWait) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 1, 60000);
  const size_t n = 1 << 16;
  DeviceTensor grad(TUTTI_DTYPE_FLOAT32, n, 4);
  cudaStream_t producer, consumer;
  CUDA_OK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  CUDA_OK(cudaMemset(grad.data, 0, grad.bytes));
  LaunchSlowFill(static_cast<float*>(grad.data), n, 3.0f, 100, producer);
  grad.desc.stream = producer;
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.postscale_factor = 2.0;
  tutti_request_t request;
  const auto start = Clock::now();
  ASSERT_EQ(tutti_allreduce(job[0], "slow", TUTTI_WORLD, &grad.desc, &grad.desc, &options, &request), TUTTI_OK)
      << LastError();
  const double submit_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::printf("submit returned after %.3f ms while the producer spins for 100 ms\n", submit_ms);
  EXPECT_LT(submit_ms, 100.0);  // it did not wait for the producer's kernel

  float* copy;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&copy), n * 4));
  ASSERT_EQ(tutti_request_stream_wait(request, consumer, 60000), TUTTI_OK) << LastError();
  LaunchCopy(static_cast<const float*>(grad.data), copy, n, consumer);
  CUDA_OK(cudaStreamSynchronize(consumer));
  std::vector<float> back(n);
  CUDA_OK(cudaMemcpy(back.data(), copy, n * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 513) ASSERT_EQ(back[i], 6.0f) << i;
  EXPECT_EQ(tutti_request_wait(request, 60000), TUTTI_OK);
  tutti_request_free(request);
  cudaFree(copy);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

// A timeline of one fused step on the NCCL path: its phases are synchronous while the timeline
// records, so their spans are GPU time. TUTTI_GPU_ARTIFACTS keeps the file.
TEST(Gpu, TimelineOfOneFusedStep) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 1, 60000);
  const char* artifacts = std::getenv("TUTTI_GPU_ARTIFACTS");
  const std::string path = std::string(artifacts ? artifacts : ::testing::TempDir()) + "/gpu_fused_step.json";
  ASSERT_EQ(tutti_timeline_start(job[0], path.c_str()), TUTTI_OK) << LastError();
  std::vector<std::unique_ptr<DeviceTensor>> grads;
  std::vector<tutti_tensor_t> descs;
  for (int k = 0; k < 16; ++k) {
    grads.push_back(std::make_unique<DeviceTensor>(TUTTI_DTYPE_FLOAT32, 1 << (10 + k % 6), 4));
    CUDA_OK(cudaMemset(grads.back()->data, 0, grads.back()->bytes));
    descs.push_back(grads.back()->desc);
  }
  tutti_request_t request;
  ASSERT_EQ(tutti_grouped_allreduce(job[0], "step", TUTTI_WORLD, 16, descs.data(), descs.data(), nullptr,
                                    &request), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_request_wait(request, 60000), TUTTI_OK) << LastError();
  tutti_request_free(request);
  ASSERT_EQ(tutti_timeline_stop(job[0]), TUTTI_OK);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string timeline = text.str();
  EXPECT_NE(timeline.find("FUSED ALLREDUCE (NCCL)"), std::string::npos) << timeline;
  EXPECT_NE(timeline.find("COPY_IN"), std::string::npos);
  EXPECT_NE(timeline.find("COPY_OUT"), std::string::npos);
}

// Send and recv of device tensors, staged through host memory: a posted recv, and one posted
// after its message arrived; the receiver's stream is ordered after the copy to the device.
TEST(Gpu, SendAndRecvOfDeviceTensors) {
  SKIP_WITHOUT_GPU();
  Tuttid tuttid;
  InProcessJob job(tuttid, 2, 60000);
  const int64_t n = 1 << 20;
  DeviceTensor sent(TUTTI_DTYPE_FLOAT32, n, 4), received(TUTTI_DTYPE_FLOAT32, n, 4);
  for (int64_t i = 0; i < n; ++i) sent.as<float>()[i] = static_cast<float>(i % 1000);
  sent.Upload();
  for (bool posted_first : {true, false}) {
    CUDA_OK(cudaMemset(received.data, 0, received.bytes));
    tutti_request_t send = nullptr, recv = nullptr;
    if (posted_first) ASSERT_EQ(tutti_recv(job[1], TUTTI_WORLD, &received.desc, 0, 5, &recv), TUTTI_OK) << LastError();
    ASSERT_EQ(tutti_send(job[0], TUTTI_WORLD, &sent.desc, 1, 5, &send), TUTTI_OK) << LastError();
    ASSERT_EQ(tutti_request_wait(send, 60000), TUTTI_OK) << LastError();
    if (!posted_first) ASSERT_EQ(tutti_recv(job[1], TUTTI_WORLD, &received.desc, 0, 5, &recv), TUTTI_OK) << LastError();
    ASSERT_EQ(tutti_request_stream_wait(recv, nullptr, 60000), TUTTI_OK) << LastError();
    received.Download();  // on the legacy default stream, which the stream wait ordered
    EXPECT_EQ(received.host, sent.host) << (posted_first ? "posted first" : "posted late");
    EXPECT_EQ(tutti_request_wait(recv, 60000), TUTTI_OK) << LastError();
    tutti_request_free(send);
    tutti_request_free(recv);
  }
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CUDA, 4096), TUTTI_ERR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(LastError().rfind("CUDA device 4096 does not exist: this process sees ", 0), 0u) << LastError();
}

}  // namespace
}  // namespace tutti::testing
