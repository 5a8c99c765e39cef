// `size` runtimes of one job living in the test process itself (explicit handles allow several
// ranks per process), against a real tuttid. Shared by the C ABI, GPU and simulated-GPU tests.
#pragma once

#include <tutti/tutti.h>

#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {

// How long a rank living in the test process waits for a request: when one rank fails early, the
// others' waits end with a failure instead of hanging the test.
constexpr int64_t kInProcessWaitMs = 60000;

// A one-dimensional float32 host tensor and its descriptor.
struct FloatTensor {
  explicit FloatTensor(int64_t n) : values(n), shape{n} {
    desc.data = values.data();
    desc.dtype = TUTTI_DTYPE_FLOAT32;
    desc.ndim = 1;
    desc.shape = shape.data();
  }
  std::vector<float> values;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
};

// A host tensor of 4-byte elements (float32 or int32) of any shape, zero-filled: for cases where
// only the shape and dtype matter.
struct ShapedTensor {
  ShapedTensor(int32_t dtype, std::vector<int64_t> dims) : shape(std::move(dims)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    bytes.assign(static_cast<size_t>(count) * 4, 0);
    desc.data = bytes.data();
    desc.dtype = dtype;
    desc.ndim = static_cast<int32_t>(shape.size());
    desc.shape = shape.data();
  }
  std::vector<char> bytes;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
};

class InProcessJob {
 public:
  // Initializes the ranks concurrently: init returns only once all of them registered.
  InProcessJob(const Tuttid& tuttid, int size, int64_t timeout_ms = 20000) : job_(UniqueJobId()) {
    std::vector<std::future<tutti_runtime_t>> pending;
    for (int r = 0; r < size; ++r)
      pending.push_back(std::async(std::launch::async, [&, r] {
        tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
        options.coordinator = tuttid.endpoint().c_str();
        options.job = job_.c_str();
        options.token = "t";
        options.rank = r;
        options.size = size;
        options.timeout_ms = timeout_ms;
        tutti_runtime_t rt = nullptr;
        tutti_status_t status = tutti_init(&options, &rt);
        EXPECT_EQ(status, TUTTI_OK) << tutti_last_error();
        return rt;
      }));
    for (auto& p : pending) runtimes_.push_back(p.get());
  }
  ~InProcessJob() {
    for (auto rt : runtimes_)
      if (rt) tutti_finalize(rt);
  }
  InProcessJob(const InProcessJob&) = delete;
  InProcessJob& operator=(const InProcessJob&) = delete;

  tutti_runtime_t operator[](int r) const { return runtimes_[r]; }
  int size() const { return static_cast<int>(runtimes_.size()); }
  // Runs `rank_body(r)` for every rank at once, each on its own thread (a rank's waits block
  // until the others submitted), and returns when all have returned.
  void OnEveryRank(const std::function<void(int rank)>& rank_body) const {
    std::vector<std::future<void>> running;
    for (int r = 0; r < size(); ++r)
      running.push_back(std::async(std::launch::async, [&rank_body, r] { rank_body(r); }));
    for (auto& rank : running) rank.get();
  }
  tutti_status_t Finalize(int r) {
    tutti_status_t status = tutti_finalize(runtimes_[r]);
    runtimes_[r] = nullptr;
    return status;
  }

 private:
  std::string job_;
  std::vector<tutti_runtime_t> runtimes_;
};

}  // namespace tutti::testing
