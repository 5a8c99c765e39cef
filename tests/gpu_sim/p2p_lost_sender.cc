// The sending rank of tests/gpu_sim/nccl_point_to_point_test.cc's lost-peer case, in a process of
// its own so that the test can kill it. Rank 0 of the job the environment names (TUTTI_COORDINATOR,
// TUTTI_JOB, ...; TUTTI_GPU_MODULE the simulator): prints "ready" once the job formed, waits for
// "go" on stdin, holds its simulated GPU (nothing queued on it runs), sends a float32 device tensor
// of 1024 elements on cuda:1 to rank 1 with tag 5, prints "sent", and waits on stdin until killed.
#include <tutti/tutti.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_sim/sim_hooks.h"

int main() {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_runtime_t rt = nullptr;
  if (tutti_init(&options, &rt) != TUTTI_OK) {
    std::printf("fail: init: %s\n", tutti_last_error());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line) || line != "go") return 1;
  // The NCCL send is queued but never runs: the receiver waits on its communicator until this
  // process is gone.
  tutti::testing::SimHooks::Of(std::getenv("TUTTI_GPU_MODULE")).pause(1);
  std::vector<float> values(1024, 1.0f);
  const int64_t shape[] = {1024};
  tutti_tensor_t tensor = TUTTI_TENSOR_INIT;
  tensor.data = values.data();
  tensor.dtype = TUTTI_DTYPE_FLOAT32;
  tensor.ndim = 1;
  tensor.shape = shape;
  tensor.device_type = TUTTI_DEVICE_CUDA;
  tensor.device_index = 1;
  tutti_request_t send = nullptr;
  if (tutti_send(rt, TUTTI_WORLD, &tensor, 1, 5, &send) != TUTTI_OK) {
    std::printf("fail: send: %s\n", tutti_last_error());
    return 1;
  }
  std::printf("sent\n");
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
