// The PMI2 exchange (launcher_kvs.h): srun --mpi=pmi2, through Slurm's libpmi2.so.0, opened at
// run time; the build needs only its header (TUTTI_HAVE_PMI2, libpmi2-0-dev).
// PMI2 is initialised once per process and never finalised: Slurm's client cannot be initialised
// again after PMI2_Finalize, and a process may call tutti_init more than once.
#include "bootstrap/launcher_kvs.h"

#include <cstdlib>

#ifdef TUTTI_HAVE_PMI2
#include <slurm/pmi2.h>

#include <chrono>
#include <future>
#include <thread>

#include "bootstrap/dynamic_library.h"
#endif

namespace tutti::bootstrap {

#ifndef TUTTI_HAVE_PMI2

Status OpenPmi2Kvs(std::unique_ptr<LauncherKvs>* kvs) {
  kvs->reset();
  if (std::getenv("PMI_FD") == nullptr) return Status::Ok();
  return Status(Code::kInvalidArgument,
                "the launcher offers PMI2 (PMI_FD is set), but this libtutti was built without "
                "PMI2's header (libpmi2-0-dev): set TUTTI_COORDINATOR");
}

#else

namespace {

struct Pmi2 {
  decltype(&PMI2_Init) init = nullptr;
  decltype(&PMI2_KVS_Put) put = nullptr;
  decltype(&PMI2_KVS_Fence) fence = nullptr;
  decltype(&PMI2_KVS_Get) get = nullptr;
  int rank = 0, size = 0;
};

// Loads and initialises PMI2 on the first call; later calls return the same outcome.
Status LoadPmi2(const Pmi2** out) {
  static Pmi2 pmi2;
  static Status loaded = [] {
    DynamicLibrary library;
    TUTTI_RETURN_IF_ERROR(
        library.Open("libpmi2.so.0", "the launcher offers PMI2 (PMI_FD is set)"));
    std::string missing;
    library.Resolve("PMI2_Init", &pmi2.init, &missing);
    library.Resolve("PMI2_KVS_Put", &pmi2.put, &missing);
    library.Resolve("PMI2_KVS_Fence", &pmi2.fence, &missing);
    library.Resolve("PMI2_KVS_Get", &pmi2.get, &missing);
    if (!missing.empty())
      return Status(Code::kInvalidArgument, "libpmi2.so.0 lacks " + missing);
    int spawned = 0, appnum = 0;
    const int status = pmi2.init(&spawned, &pmi2.size, &pmi2.rank, &appnum);
    if (status != PMI2_SUCCESS)
      return Status(Code::kInvalidArgument, "PMI2: PMI2_Init failed with " + std::to_string(status));
    return Status::Ok();
  }();
  *out = &pmi2;
  return loaded;
}

class Pmi2Kvs final : public LauncherKvs {
 public:
  explicit Pmi2Kvs(const Pmi2* pmi2) : pmi2_(pmi2) {}

  const char* name() const override { return "PMI2"; }
  int rank() const override { return pmi2_->rank; }
  int size() const override { return pmi2_->size; }
  bool AllOnThisHost() const override {
    const char* nodes = std::getenv("SLURM_STEP_NUM_NODES");
    return nodes != nullptr && std::string(nodes) == "1";
  }

  Status Put(const std::string& key, const std::string& value) override {
    if (value.size() >= PMI2_MAX_VALLEN)
      return Status(Code::kInternal, "PMI2: a value of " + std::to_string(value.size()) +
                                         " bytes is over PMI2's limit");
    const int status = pmi2_->put(key.c_str(), value.c_str());
    if (status != PMI2_SUCCESS)
      return Status(Code::kInternal, "PMI2: PMI2_KVS_Put failed with " + std::to_string(status));
    return Status::Ok();
  }

  // PMI2_KVS_Fence has no timeout of its own: it runs on a thread that is left behind, still
  // blocked, if the others do not come in time (the job is failing then).
  Status Fence(int64_t timeout_ms) override {
    auto done = std::make_shared<std::promise<int>>();
    std::future<int> result = done->get_future();
    const Pmi2* pmi2 = pmi2_;
    std::thread([pmi2, done] { done->set_value(pmi2->fence()); }).detach();
    if (result.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready)
      return Status(Code::kTimeout,
                    "PMI2: not every task of the step reached tutti's exchange within " +
                        std::to_string(timeout_ms) + " ms (does every rank call init?)");
    const int status = result.get();
    if (status != PMI2_SUCCESS)
      return Status(Code::kInternal, "PMI2: PMI2_KVS_Fence failed with " + std::to_string(status));
    return Status::Ok();
  }

  Status Get(int rank, const std::string& key, std::string* value) override {
    char buffer[PMI2_MAX_VALLEN];
    int length = 0;
    const int status = pmi2_->get(nullptr, rank, key.c_str(), buffer, sizeof(buffer), &length);
    if (status != PMI2_SUCCESS || length < 0)
      return Status(Code::kInternal, "PMI2: PMI2_KVS_Get of " + key + " failed with " +
                                         std::to_string(status));
    value->assign(buffer, static_cast<size_t>(length));
    // Slurm counts the terminating NUL in the length.
    while (!value->empty() && value->back() == '\0') value->pop_back();
    return Status::Ok();
  }

 private:
  const Pmi2* pmi2_;
};

}  // namespace

Status OpenPmi2Kvs(std::unique_ptr<LauncherKvs>* kvs) {
  kvs->reset();
  if (std::getenv("PMI_FD") == nullptr) return Status::Ok();
  const Pmi2* pmi2 = nullptr;
  TUTTI_RETURN_IF_ERROR(LoadPmi2(&pmi2));
  *kvs = std::make_unique<Pmi2Kvs>(pmi2);
  return Status::Ok();
}

#endif  // TUTTI_HAVE_PMI2

}  // namespace tutti::bootstrap
