// The PMIx exchange (launcher_kvs.h): OpenMPI's mpirun and srun --mpi=pmix. libpmix.so.2 is
// opened at run time; the build needs only its header (TUTTI_HAVE_PMIX), for the ABI's structs.
// PMIx_Init and PMIx_Finalize nest, so an MPI library in the same process is not disturbed.
#include "bootstrap/launcher_kvs.h"

#include <cstdlib>

#ifdef TUTTI_HAVE_PMIX
#include <pmix.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "bootstrap/dynamic_library.h"
#endif

namespace tutti::bootstrap {

#ifndef TUTTI_HAVE_PMIX

Status OpenPmixKvs(std::unique_ptr<LauncherKvs>* kvs) {
  kvs->reset();
  if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr)
    return Status::Ok();
  return Status(Code::kInvalidArgument,
                "the launcher offers PMIx (PMIX_NAMESPACE is set), but this libtutti was built "
                "without PMIx's header (libpmix-dev): set TUTTI_COORDINATOR");
}

#else

namespace {

// The entry points tutti uses, resolved once per process.
struct Pmix {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence_nb) fence_nb = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Value_destruct) value_destruct = nullptr;
  decltype(&PMIx_Error_string) error_string = nullptr;

  std::string Error(const char* call, pmix_status_t status) const {
    return std::string("PMIx: ") + call + " failed: " + error_string(status) + " (" +
           std::to_string(status) + ")";
  }
};

Status LoadPmix(const Pmix** out) {
  static Pmix pmix;
  static Status loaded = [] {
    DynamicLibrary library;
    TUTTI_RETURN_IF_ERROR(
        library.Open("libpmix.so.2", "the launcher offers PMIx (PMIX_NAMESPACE is set)"));
    std::string missing;
    library.Resolve("PMIx_Init", &pmix.init, &missing);
    library.Resolve("PMIx_Finalize", &pmix.finalize, &missing);
    library.Resolve("PMIx_Put", &pmix.put, &missing);
    library.Resolve("PMIx_Commit", &pmix.commit, &missing);
    library.Resolve("PMIx_Fence_nb", &pmix.fence_nb, &missing);
    library.Resolve("PMIx_Get", &pmix.get, &missing);
    library.Resolve("PMIx_Value_destruct", &pmix.value_destruct, &missing);
    library.Resolve("PMIx_Error_string", &pmix.error_string, &missing);
    if (!missing.empty())
      return Status(Code::kInvalidArgument, "libpmix.so.2 lacks " + missing +
                                                ": it is too old for tutti (PMIx 3 or later)");
    return Status::Ok();
  }();
  *out = &pmix;
  return loaded;
}

void SetInfo(pmix_info_t* info, const char* key) {
  std::memset(info, 0, sizeof(*info));
  std::strncpy(info->key, key, PMIX_MAX_KEYLEN);
}

// A fence's outcome, shared with PMIx's callback. Heap-held and given up on a timeout: the
// callback may still come later and must find it alive.
struct FenceWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
  pmix_info_t info[2];
};

void FenceDone(pmix_status_t status, void* data) {
  auto* wait = static_cast<FenceWait*>(data);
  std::lock_guard<std::mutex> lock(wait->mu);
  wait->status = status;
  wait->done = true;
  wait->cv.notify_all();
}

class PmixKvs final : public LauncherKvs {
 public:
  static Status Open(std::unique_ptr<LauncherKvs>* kvs) {
    const Pmix* pmix = nullptr;
    TUTTI_RETURN_IF_ERROR(LoadPmix(&pmix));
    auto opened = std::unique_ptr<PmixKvs>(new PmixKvs(pmix));
    pmix_status_t status = pmix->init(&opened->self_, nullptr, 0);
    if (status != PMIX_SUCCESS) return Status(Code::kInvalidArgument, pmix->Error("PMIx_Init", status));
    opened->initialized_ = true;
    uint32_t size = 0, local = 0;
    TUTTI_RETURN_IF_ERROR(opened->JobNumber(PMIX_JOB_SIZE, &size));
    TUTTI_RETURN_IF_ERROR(opened->JobNumber(PMIX_LOCAL_SIZE, &local));
    opened->size_ = static_cast<int>(size);
    opened->all_local_ = local == size;
    *kvs = std::move(opened);
    return Status::Ok();
  }

  ~PmixKvs() override {
    if (initialized_) pmix_->finalize(nullptr, 0);
  }

  const char* name() const override { return "PMIx"; }
  int rank() const override { return static_cast<int>(self_.rank); }
  int size() const override { return size_; }
  bool AllOnThisHost() const override { return all_local_; }

  Status Put(const std::string& key, const std::string& value) override {
    pmix_value_t v;
    std::memset(&v, 0, sizeof(v));
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies it
    pmix_status_t status = pmix_->put(PMIX_GLOBAL, key.c_str(), &v);
    if (status != PMIX_SUCCESS) return Status(Code::kInternal, pmix_->Error("PMIx_Put", status));
    status = pmix_->commit();
    if (status != PMIX_SUCCESS) return Status(Code::kInternal, pmix_->Error("PMIx_Commit", status));
    return Status::Ok();
  }

  Status Fence(int64_t timeout_ms) override {
    auto* wait = new FenceWait;
    SetInfo(&wait->info[0], PMIX_COLLECT_DATA);
    wait->info[0].value.type = PMIX_BOOL;
    wait->info[0].value.data.flag = true;
    // Asked of the launcher too, so that it gives up on the fence as well.
    SetInfo(&wait->info[1], PMIX_TIMEOUT);
    wait->info[1].value.type = PMIX_INT;
    wait->info[1].value.data.integer = static_cast<int>((timeout_ms + 999) / 1000);
    // NULL procs: every process of our namespace.
    pmix_status_t status = pmix_->fence_nb(nullptr, 0, wait->info, 2, FenceDone, wait);
    if (status != PMIX_SUCCESS) {
      delete wait;
      return Status(Code::kInternal, pmix_->Error("PMIx_Fence_nb", status));
    }
    std::unique_lock<std::mutex> lock(wait->mu);
    if (!wait->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return wait->done; })) {
      lock.release();  // `wait` stays for the late callback
      return Status(Code::kTimeout,
                    "PMIx: not every process of the job reached tutti's exchange within " +
                        std::to_string(timeout_ms) + " ms (does every rank call init?)");
    }
    status = wait->status;
    lock.unlock();
    delete wait;
    if (status == PMIX_ERR_TIMEOUT)
      return Status(Code::kTimeout, "PMIx: not every process of the job reached tutti's exchange "
                                    "within " + std::to_string(timeout_ms) + " ms");
    if (status != PMIX_SUCCESS) return Status(Code::kInternal, pmix_->Error("PMIx_Fence", status));
    return Status::Ok();
  }

  Status Get(int rank, const std::string& key, std::string* value) override {
    pmix_proc_t proc = self_;
    proc.rank = static_cast<pmix_rank_t>(rank);
    pmix_value_t* got = nullptr;
    pmix_status_t status = pmix_->get(&proc, key.c_str(), nullptr, 0, &got);
    if (status != PMIX_SUCCESS) return Status(Code::kInternal, pmix_->Error("PMIx_Get", status));
    const bool text = got->type == PMIX_STRING && got->data.string != nullptr;
    if (text) *value = got->data.string;
    pmix_->value_destruct(got);
    std::free(got);
    if (!text) return Status(Code::kInternal, "PMIx: " + key + " holds no string");
    return Status::Ok();
  }

 private:
  explicit PmixKvs(const Pmix* pmix) : pmix_(pmix) { std::memset(&self_, 0, sizeof(self_)); }

  // A number the launcher keeps for the whole job (PMIX_JOB_SIZE, PMIX_LOCAL_SIZE).
  Status JobNumber(const char* key, uint32_t* number) {
    pmix_proc_t job = self_;
    job.rank = PMIX_RANK_WILDCARD;
    pmix_value_t* got = nullptr;
    pmix_status_t status = pmix_->get(&job, key, nullptr, 0, &got);
    if (status != PMIX_SUCCESS)
      return Status(Code::kInternal, pmix_->Error((std::string("PMIx_Get of ") + key).c_str(), status));
    const bool ok = got->type == PMIX_UINT32;
    if (ok) *number = got->data.uint32;
    pmix_->value_destruct(got);
    std::free(got);
    if (!ok) return Status(Code::kInternal, std::string("PMIx: ") + key + " is not a uint32");
    return Status::Ok();
  }

  const Pmix* pmix_;
  pmix_proc_t self_;
  bool initialized_ = false;
  int size_ = 0;
  bool all_local_ = false;
};

}  // namespace

Status OpenPmixKvs(std::unique_ptr<LauncherKvs>* kvs) {
  kvs->reset();
  if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr)
    return Status::Ok();
  return PmixKvs::Open(kvs);
}

#endif  // TUTTI_HAVE_PMIX

}  // namespace tutti::bootstrap
