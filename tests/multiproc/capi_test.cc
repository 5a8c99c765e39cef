// The C ABI's argument checks and statuses, from runtimes living in the test process itself
// (explicit handles allow several ranks per process) against a real tuttid.
#include <tutti/tutti.h>

#include <cstddef>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

namespace tutti::testing {
namespace {

std::string LastError() { return tutti_last_error(); }

TEST(CApi, VersionAndStatusStrings) {
  int32_t version = 0;
  ASSERT_EQ(tutti_get_version(&version), TUTTI_OK);
  EXPECT_EQ(version, TUTTI_VERSION);
  EXPECT_EQ(tutti_get_version(nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "version is NULL");
  for (tutti_status_t s = TUTTI_ERR_DEVICE_UNAVAILABLE; s <= TUTTI_IN_PROGRESS; ++s)
    EXPECT_EQ(std::string(tutti_status_string(s)).rfind("unknown status", 0), std::string::npos) << s;
  EXPECT_STREQ(tutti_status_string(-999), "unknown status: not a tutti status code");
  EXPECT_STREQ(tutti_status_string(TUTTI_ERR_PEER_LOST),
               "peer lost: a rank of the set died or disconnected; restart or re-form the job");
}

// Where no GPU can be used (this build or this machine), a device tensor fails with its own
// status naming the reason; tests/gpu covers machines with one.
TEST(CApi, DeviceTensorWithoutUsableGpuFailsWithItsOwnStatus) {
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CPU, 0), TUTTI_OK);
  EXPECT_EQ(tutti_device_check(7, 0), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "unknown device type 7");
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CUDA, -1), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "device_index is negative");
  if (tutti_device_check(TUTTI_DEVICE_CUDA, 0) == TUTTI_OK)
    GTEST_SKIP() << "a CUDA device is usable here: tests/gpu covers device tensors";
  const std::string reason = LastError();
#if TUTTI_TEST_GPU_BUILT
  EXPECT_EQ(reason.rfind("no CUDA device is visible to this process", 0), 0u) << reason;
#else
  EXPECT_EQ(reason,
            "this libtutti was built without GPU support (TUTTI_GPU=OFF or no CUDA toolkit at "
            "build time): device tensors cannot be used");
#endif
  // Asked again, the same answer (the loader remembers its failure).
  EXPECT_EQ(tutti_device_check(TUTTI_DEVICE_CUDA, 0), TUTTI_ERR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(LastError(), reason);

  Tuttid tuttid;
  InProcessJob job(tuttid, 1);
  FloatTensor tensor(4);
  tensor.desc.device_type = TUTTI_DEVICE_CUDA;
  tutti_request_t request = nullptr;
  EXPECT_EQ(tutti_allreduce(job[0], "grad", TUTTI_WORLD, &tensor.desc, &tensor.desc, nullptr, &request),
            TUTTI_ERR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(LastError(), "allreduce 'grad': input tensor is on cuda:0: " + reason);
  EXPECT_EQ(request, nullptr);
  tensor.desc.device_type = 5;
  EXPECT_EQ(tutti_broadcast(job[0], "b", TUTTI_WORLD, &tensor.desc, 0, &request),
            TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "broadcast 'b': input tensor has unknown device type 5");

  // A host request's stream wait is a plain wait.
  tensor.desc.device_type = TUTTI_DEVICE_CPU;
  tensor.values = {1, 2, 3, 4};
  ASSERT_EQ(tutti_allreduce(job[0], "host", TUTTI_WORLD, &tensor.desc, &tensor.desc, nullptr, &request),
            TUTTI_OK);
  EXPECT_EQ(tutti_request_stream_wait(request, nullptr, 30000), TUTTI_OK) << LastError();
  EXPECT_EQ(tutti_request_test(request), TUTTI_OK);
  EXPECT_EQ(tensor.values, (std::vector<float>{1, 2, 3, 4}));
  tutti_request_free(request);
}

TEST(CApi, InitArgumentErrors) {
  EXPECT_EQ(tutti_init(nullptr, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "runtime is NULL");

  tutti_runtime_t rt = nullptr;
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.struct_size = 0;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "options.struct_size is 0; initialize the struct with its _INIT macro");

  options = TUTTI_INIT_OPTIONS_INIT;
  options.header_version = TUTTI_MAKE_VERSION(TUTTI_VERSION_MAJOR + 1, 0, 0);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_VERSION_MISMATCH);
  EXPECT_EQ(LastError(), "version mismatch: header " +
                             std::to_string(TUTTI_MAKE_VERSION(TUTTI_VERSION_MAJOR + 1, 0, 0)) +
                             ", library " + std::to_string(TUTTI_VERSION) +
                             "; rebuild against this library's tutti.h");

  unsetenv("TUTTI_COORDINATOR");
  options = TUTTI_INIT_OPTIONS_INIT;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(),
            "no coordinator: set TUTTI_COORDINATOR (e.g. tcp://127.0.0.1:5555) or "
            "options.coordinator");
  // "auto" asks for zero-setup, which needs a launcher's exchange (docs/launchers.md).
  setenv("TUTTI_COORDINATOR", "auto", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(),
            "TUTTI_COORDINATOR=auto: no launcher offers an exchange here (PMIx or PMI2); start "
            "the ranks with mpirun or srun --mpi=pmix, or name a running tuttid");
  unsetenv("TUTTI_COORDINATOR");

  options.coordinator = "tcp://127.0.0.1:1";
  options.rank = 2;
  options.size = 2;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "rank 2 outside [0, 2)");

  setenv("TUTTI_RANK", "zero", 1);
  options.rank = -1;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "TUTTI_RANK='zero' is not an integer");
  unsetenv("TUTTI_RANK");

  options = TUTTI_INIT_OPTIONS_INIT;
  options.allocate = [](size_t bytes, void*) { return std::malloc(bytes); };
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "options.allocate and options.deallocate must be given together");

  // No launcher named the job and neither did the caller: two unrelated jobs must never meet
  // under a default id.
  for (const char* launcher_job : {"TUTTI_JOB", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                   "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    unsetenv(launcher_job);
  options = TUTTI_INIT_OPTIONS_INIT;
  options.coordinator = "tcp://127.0.0.1:1";
  options.rank = 0;
  options.size = 1;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "no job id: set TUTTI_JOB (tuttirun does) or options.job, or start the "
                         "ranks with mpirun, Slurm or torchrun, whose job ids tutti reads");

  options = TUTTI_INIT_OPTIONS_INIT;
  options.coordinator = "nonsense";
  options.job = "capi-init-errors";
  options.rank = 0;
  options.size = 1;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError().rfind("cannot use coordinator endpoint 'nonsense': ", 0), 0u) << LastError();
  EXPECT_EQ(rt, nullptr);
}

TEST(CApi, FusionCacheStallAndTimelineOptionErrors) {
  tutti_runtime_t rt = nullptr;
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.coordinator = "tcp://127.0.0.1:1";
  options.rank = 0;
  options.size = 1;
  options.cycle_time_ms = 70000;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "the cycle time (TUTTI_CYCLE_TIME_MS) must be in [0, 60000] ms");
  options.cycle_time_ms = -1;
  options.cache_capacity = 2000000;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "the cache capacity (TUTTI_CACHE_CAPACITY) 2000000 is outside [0, 1048576]");
  options.cache_capacity = -1;
  setenv("TUTTI_FUSION_THRESHOLD", "lots", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "TUTTI_FUSION_THRESHOLD='lots' is not an integer");
  unsetenv("TUTTI_FUSION_THRESHOLD");
  setenv("TUTTI_WAIT_SPIN_US", "-5", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "TUTTI_WAIT_SPIN_US -5 is outside [0, 1000000]");
  setenv("TUTTI_WAIT_SPIN_US", "forever", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "TUTTI_WAIT_SPIN_US='forever' is not an integer");
  unsetenv("TUTTI_WAIT_SPIN_US");
  setenv("TUTTI_STALL_WARNING_SECONDS", "soon", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "TUTTI_STALL_WARNING_SECONDS='soon' is not a number");
  unsetenv("TUTTI_STALL_WARNING_SECONDS");

  Tuttid tuttid;
  options.coordinator = tuttid.endpoint().c_str();
  options.job = "capi-timeline-error";
  options.timeline_path = "/nonexistent-tutti-dir/t.json";
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "cannot write the timeline to '/nonexistent-tutti-dir/t.rank0.json': No "
                         "such file or directory");
  EXPECT_EQ(rt, nullptr);
  options.timeline_path = nullptr;
  setenv("TUTTI_AUTOTUNE_LOG", "/nonexistent-tutti-dir/trials.csv", 1);
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "cannot write the autotuning log (TUTTI_AUTOTUNE_LOG) to "
                         "'/nonexistent-tutti-dir/trials.csv': No such file or directory");
  unsetenv("TUTTI_AUTOTUNE_LOG");
  EXPECT_EQ(rt, nullptr);
}

// Counters on both sides and timeline calls, with their argument errors.
TEST(CApi, CountersAndTimelineCalls) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2);
  tutti_counters_t counters = TUTTI_COUNTERS_INIT;
  EXPECT_EQ(tutti_get_counters(job[0], nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "counters is NULL");
  counters.struct_size = 0;
  EXPECT_EQ(tutti_get_counters(job[0], &counters), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "counters.struct_size is 0; initialize the struct with its _INIT macro");

  std::vector<FloatTensor> tensors;
  tensors.emplace_back(8);
  tensors.emplace_back(8);
  std::vector<std::future<tutti_status_t>> done;
  for (int r = 0; r < 2; ++r)
    done.push_back(std::async(std::launch::async, [&, r] {
      tutti_request_t request = nullptr;
      tutti_status_t s = tutti_allreduce(job[r], "c", TUTTI_WORLD, &tensors[r].desc,
                                         &tensors[r].desc, nullptr, &request);
      if (s != TUTTI_OK) return s;
      s = tutti_request_wait(request, -1);
      tutti_request_free(request);
      return s;
    }));
  for (auto& d : done) ASSERT_EQ(d.get(), TUTTI_OK);

  counters = TUTTI_COUNTERS_INIT;
  ASSERT_EQ(tutti_get_counters(job[0], &counters), TUTTI_OK);
  EXPECT_EQ(counters.collectives, 1u);
  EXPECT_EQ(counters.tensors_executed, 1u);
  EXPECT_EQ(counters.tensors_announced, 1u);
  EXPECT_GE(counters.announce_messages, 1u);
  EXPECT_GE(counters.execute_messages, 1u);
  // A caller compiled when the struct was shorter: fields past its size stay untouched.
  tutti_counters_t old = TUTTI_COUNTERS_INIT;
  old.struct_size = offsetof(tutti_counters_t, execute_messages);
  old.execute_messages = 12345;
  ASSERT_EQ(tutti_get_counters(job[0], &old), TUTTI_OK);
  EXPECT_EQ(old.execute_messages, 12345u);
  EXPECT_EQ(old.tensors_announced, 1u);

  tutti_coordinator_counters_t coordinator = TUTTI_COORDINATOR_COUNTERS_INIT;
  ASSERT_EQ(tutti_get_coordinator_counters(job[1], &coordinator), TUTTI_OK);
  EXPECT_EQ(coordinator.tensors_released, 1u);
  EXPECT_EQ(coordinator.tensors_announced, 2u);
  EXPECT_EQ(coordinator.execute_messages, 2u);  // one per member
  EXPECT_EQ(tutti_get_coordinator_counters(job[1], nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "counters is NULL");

  EXPECT_EQ(tutti_timeline_start(job[0], nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "path is NULL or empty");
  EXPECT_EQ(tutti_timeline_start(job[0], "/nonexistent-tutti-dir/t.json"), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "cannot write the timeline to '/nonexistent-tutti-dir/t.json': No such "
                         "file or directory");
  EXPECT_EQ(tutti_timeline_stop(job[0]), TUTTI_OK);  // none running: nothing to do
  EXPECT_EQ(tutti_timeline_stop(nullptr), TUTTI_ERR_INVALID_ARGUMENT);
}

TEST(CApi, CoordinatorThatDoesNotAnswerIsReported) {
  // A bound but silent port: tuttid started and frozen.
  Tuttid tuttid;
  tuttid.process().Signal(SIGSTOP);
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.coordinator = tuttid.endpoint().c_str();
  options.job = "capi-silent-coordinator";
  options.rank = 0;
  options.size = 1;
  options.timeout_ms = 200;
  tutti_runtime_t rt = nullptr;
  EXPECT_EQ(tutti_init(&options, &rt), TUTTI_ERR_COORDINATOR_LOST);
  EXPECT_EQ(LastError(), "coordinator lost: no answer to the registration from " +
                             tuttid.endpoint() + " before the deadline (is tuttid running there?)");
  tuttid.process().Signal(SIGCONT);
}

TEST(CApi, QueriesAndSetErrors) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2);
  tutti_runtime_t rt0 = job[0], rt1 = job[1];
  int32_t value = -1;
  EXPECT_EQ(tutti_rank(rt1, &value), TUTTI_OK);
  EXPECT_EQ(value, 1);
  EXPECT_EQ(tutti_size(rt1, &value), TUTTI_OK);
  EXPECT_EQ(value, 2);
  EXPECT_EQ(tutti_rank(nullptr, &value), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "runtime is NULL");
  EXPECT_EQ(tutti_local_size(rt0, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "out is NULL");

  // Set {1}: rank 1 is its only member, so its add completes alone; rank 0 learns the id at once.
  int32_t only_one[] = {1}, id0 = -1, id1 = -1;
  ASSERT_EQ(tutti_process_set_add(rt0, only_one, 1, 0, &id0), TUTTI_OK) << LastError();
  ASSERT_EQ(tutti_process_set_add(rt1, only_one, 1, 0, &id1), TUTTI_OK) << LastError();
  EXPECT_EQ(id0, 1);
  EXPECT_EQ(id1, 1);

  int32_t included = -1;
  EXPECT_EQ(tutti_process_set_included(rt0, id0, &included), TUTTI_OK);
  EXPECT_EQ(included, 0);
  EXPECT_EQ(tutti_process_set_rank(rt0, id0, &value), TUTTI_ERR_NOT_A_MEMBER);
  EXPECT_EQ(LastError(), "rank 0 is not a member of process set 1");
  EXPECT_EQ(tutti_process_set_rank(rt1, id1, &value), TUTTI_OK);
  EXPECT_EQ(value, 0);
  int32_t ranks[4], count = 0;
  EXPECT_EQ(tutti_process_set_ranks(rt0, TUTTI_WORLD, ranks, 4, &count), TUTTI_OK);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(ranks[1], 1);
  EXPECT_EQ(tutti_process_set_size(rt0, 9, &count), TUTTI_ERR_UNKNOWN_SET);
  EXPECT_EQ(LastError(), "process set 9 is unknown to rank 0 (add it on this rank first)");

  FloatTensor t(4);
  tutti_request_t request = nullptr;
  EXPECT_EQ(tutti_allreduce(rt0, "x", id0, &t.desc, &t.desc, nullptr, &request),
            TUTTI_ERR_NOT_A_MEMBER);
  EXPECT_EQ(LastError(), "rank 0 is not a member of process set 1");
  EXPECT_EQ(request, nullptr);
  EXPECT_EQ(tutti_allreduce(rt0, "x", 7, &t.desc, &t.desc, nullptr, &request), TUTTI_ERR_UNKNOWN_SET);
  EXPECT_EQ(LastError(), "process set 7 is unknown to rank 0 (add it on this rank first)");

  int32_t outside[] = {0, 5, 9}, repeated[] = {1, 0, 1};
  EXPECT_EQ(tutti_process_set_add(rt0, outside, 3, 0, &value), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "ranks [5, 9] are outside the world of 2 ranks");
  EXPECT_EQ(tutti_process_set_add(rt0, repeated, 3, 0, &value), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "ranks [1] are listed more than once");
  EXPECT_EQ(tutti_process_set_add(rt0, repeated, 0, 0, &value), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "nranks is 0; a set needs a rank");
  EXPECT_EQ(tutti_process_set_remove(rt0, TUTTI_WORLD, 0), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "the world process set (0) cannot be removed");
  EXPECT_EQ(tutti_process_set_remove(rt0, 42, 0), TUTTI_ERR_UNKNOWN_SET);
  EXPECT_EQ(LastError(), "process set 42 is unknown to rank 0 (add it on this rank first)");

  // Autotuning one set: a member's ask is queued at once; others are told why not.
  EXPECT_EQ(tutti_process_set_autotune(rt1, id1), TUTTI_OK) << LastError();
  EXPECT_EQ(tutti_process_set_autotune(rt0, id0), TUTTI_ERR_NOT_A_MEMBER);
  EXPECT_EQ(LastError(), "rank 0 is not a member of process set 1");
  EXPECT_EQ(tutti_process_set_autotune(rt0, 42), TUTTI_ERR_UNKNOWN_SET);
  EXPECT_EQ(LastError(), "process set 42 is unknown to rank 0 (add it on this rank first)");
  EXPECT_EQ(tutti_process_set_autotune(nullptr, TUTTI_WORLD), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "runtime is NULL");
}

TEST(CApi, AllreduceArgumentErrors) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2);
  tutti_runtime_t rt = job[0];
  FloatTensor t(4), shorter(3);
  tutti_request_t request = nullptr;
  auto submit = [&](const tutti_tensor_t* in, const tutti_tensor_t* out,
                    const tutti_allreduce_options_t* options, const char* name = "x") {
    return tutti_allreduce(rt, name, TUTTI_WORLD, in, out, options, &request);
  };
  EXPECT_EQ(submit(nullptr, &t.desc, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "input is NULL");
  EXPECT_EQ(tutti_allreduce(rt, "x", 0, &t.desc, &t.desc, nullptr, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "request is NULL");
  EXPECT_EQ(submit(&t.desc, &t.desc, nullptr, ""), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "name is empty; pass NULL for an automatic name");
  EXPECT_EQ(submit(&t.desc, &shorter.desc, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': input has 4 elements, output 3");

  tutti_tensor_t bad = t.desc;
  bad.dtype = 99;
  EXPECT_EQ(submit(&bad, &bad, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': input tensor has unknown dtype 99");
  bad = t.desc;
  bad.ndim = 17;
  EXPECT_EQ(submit(&bad, &bad, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "input.ndim is 17, not in [0, 16]");
  bad = t.desc;
  bad.shape = nullptr;
  EXPECT_EQ(submit(&bad, &bad, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "input.shape is NULL");
  bad = t.desc;
  bad.device_type = 9;
  EXPECT_EQ(submit(&bad, &bad, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': input tensor has unknown device type 9");
  bad.device_type = TUTTI_DEVICE_CUDA;
  bad.device_index = -1;
  EXPECT_EQ(submit(&bad, &bad, nullptr), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': input tensor has device index -1");
  // Device tensors where no GPU is usable: CApi.DeviceTensorWithoutUsableGpuFailsWithItsOwnStatus.

  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = 0;
  EXPECT_EQ(submit(&t.desc, &t.desc, &options), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': unknown reduce op 0");

  // Integers take scale factors (as Horovod scales them); bool takes neither them nor average.
  std::vector<uint8_t> flags(4);
  int64_t shape[] = {4};
  tutti_tensor_t bool_tensor = TUTTI_TENSOR_INIT;
  bool_tensor.data = flags.data();
  bool_tensor.dtype = TUTTI_DTYPE_BOOL;
  bool_tensor.ndim = 1;
  bool_tensor.shape = shape;
  options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.prescale_factor = 0.5;
  EXPECT_EQ(submit(&bool_tensor, &bool_tensor, &options), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': prescale and postscale factors other than 1 do not apply to bool tensors");
  options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = TUTTI_OP_AVERAGE;
  EXPECT_EQ(submit(&bool_tensor, &bool_tensor, &options), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "allreduce 'x': average is not defined for bool tensors; use sum (logical or) or min (logical and)");

  // An options struct from an older caller (only struct_size and reduce_op) gets defaults.
  tutti_allreduce_options_t old = TUTTI_ALLREDUCE_OPTIONS_INIT;
  old.struct_size = offsetof(tutti_allreduce_options_t, prescale_factor);
  old.reduce_op = TUTTI_OP_MAX;
  old.prescale_factor = 123.0;  // beyond the struct_size: must be ignored
  ASSERT_EQ(submit(&t.desc, &t.desc, &old, "old"), TUTTI_OK) << LastError();

  // Duplicate pending name; a wait that times out leaves the request pending.
  tutti_request_t first = request;
  EXPECT_EQ(submit(&t.desc, &t.desc, nullptr, "old"), TUTTI_ERR_DUPLICATE_NAME);
  EXPECT_EQ(LastError(), "a request named 'old' is already pending on process set 0");
  EXPECT_EQ(tutti_request_test(first), TUTTI_IN_PROGRESS);
  EXPECT_EQ(tutti_request_wait(first, 50), TUTTI_ERR_TIMEOUT);
  EXPECT_EQ(LastError(), "wait for 'old' timed out after 50 ms; the request is still pending");

  // Rank 1 joins with the same op: the old caller's defaults (no scaling) must have applied.
  FloatTensor other(4);
  for (int i = 0; i < 4; ++i) {
    t.values[i] = static_cast<float>(i);
    other.values[i] = 10.0f;
  }
  tutti_allreduce_options_t max = TUTTI_ALLREDUCE_OPTIONS_INIT;
  max.reduce_op = TUTTI_OP_MAX;
  tutti_request_t second = nullptr;
  ASSERT_EQ(tutti_allreduce(job[1], "old", TUTTI_WORLD, &other.desc, &other.desc, &max, &second), TUTTI_OK);
  EXPECT_EQ(tutti_request_wait(first, -1), TUTTI_OK) << LastError();
  EXPECT_EQ(tutti_request_wait(second, -1), TUTTI_OK) << LastError();
  EXPECT_EQ(t.values, std::vector<float>(4, 10.0f));
  EXPECT_EQ(tutti_request_free(first), TUTTI_OK);
  EXPECT_EQ(tutti_request_free(second), TUTTI_OK);
  EXPECT_EQ(tutti_request_wait(nullptr, 0), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "request is NULL");
}

TEST(CApi, FinalizeFailsPendingRequests) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 2);
  FloatTensor t(4);
  tutti_request_t request = nullptr;
  ASSERT_EQ(tutti_allreduce(job[0], "never", TUTTI_WORLD, &t.desc, &t.desc, nullptr, &request), TUTTI_OK);
  ASSERT_EQ(job.Finalize(0), TUTTI_OK);
  EXPECT_EQ(tutti_request_wait(request, 1000), TUTTI_ERR_SHUT_DOWN);
  EXPECT_EQ(LastError(), "the runtime was finalized while the request was pending");
  EXPECT_EQ(tutti_request_free(request), TUTTI_OK);
}

}  // namespace
}  // namespace tutti::testing
