// `size` runtimes of one job living in the test process itself (explicit handles allow several
// ranks per process), against a real tuttid. Shared by the C ABI, GPU and simulated-GPU tests.
#pragma once

#include <tutti/tutti.h>

#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {

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
