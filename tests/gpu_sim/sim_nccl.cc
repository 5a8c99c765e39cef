#include "tests/gpu_sim/sim_nccl.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "client/kernels/reduce.h"
#include "gpu/module_errors.h"

namespace tutti::gpu::sim {
namespace {

constexpr uint32_t kReady = 0x53494d4e;  // "SIMN"
// How long one collective waits for its peers before it fails the communicator: far beyond any
// test's step, so that the lane's own deadline and interrupt (which abort it) decide first.
constexpr auto kPatience = std::chrono::minutes(5);

std::string Fingerprint(const std::string& id) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

timespec In(std::chrono::milliseconds from_now) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = now.tv_nsec + from_now.count() * 1000000;
  now.tv_sec += ns / 1000000000;
  now.tv_nsec = ns % 1000000000;
  return now;
}

Status Errno(const std::string& what) {
  return Status(Code::kInternal, "gpu sim: " + what + ": " + std::strerror(errno));
}

// A shared memory segment, mapped; unmapped (not unlinked) when it goes.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    if (data_ != nullptr && data_ != MAP_FAILED) munmap(data_, size_);
  }
  Status Create(const std::string& name, size_t size) {
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return Errno("shm_open " + name);
    return Map(fd, size, PROT_READ | PROT_WRITE, name);
  }
  Status Open(const std::string& name) {
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd < 0) return Errno("shm_open " + name);
    struct stat st;
    if (fstat(fd, &st) != 0) {
      close(fd);
      return Errno("fstat " + name);
    }
    return Map(fd, static_cast<size_t>(st.st_size), PROT_READ, name);
  }
  char* data() const { return static_cast<char*>(data_); }

 private:
  Status Map(int fd, size_t size, int protection, const std::string& name) {
    size_ = std::max<size_t>(size, 1);
    if ((protection & PROT_WRITE) && ftruncate(fd, static_cast<off_t>(size_)) != 0) {
      close(fd);
      return Errno("ftruncate " + name);
    }
    data_ = mmap(nullptr, size_, protection, MAP_SHARED, fd, 0);
    close(fd);
    if (data_ == MAP_FAILED) return Errno("mmap " + name);
    return Status::Ok();
  }
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

// The rendezvous every rank maps: a robust process-shared mutex (a rank that dies holding it does
// not stop the others), a condition on the monotonic clock, the join count and a barrier.
struct Comm::Shared {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  std::atomic<uint32_t> ready;
  int32_t nranks, joined, arrived, aborted;
  uint64_t generation;
};

namespace {

// Locks the rendezvous' mutex, taking it over from a rank that died holding it.
class Locked {
 public:
  explicit Locked(pthread_mutex_t* mu) : mu_(mu) {
    if (pthread_mutex_lock(mu_) == EOWNERDEAD) pthread_mutex_consistent(mu_);
  }
  ~Locked() { pthread_mutex_unlock(mu_); }
  // Waits at most `slice` for a signal.
  void Wait(pthread_cond_t* cv, std::chrono::milliseconds slice) {
    const timespec until = In(slice);
    if (pthread_cond_timedwait(cv, mu_, &until) == EOWNERDEAD) pthread_mutex_consistent(mu_);
  }

 private:
  pthread_mutex_t* mu_;
};

}  // namespace

Comm::Comm(std::string name, int32_t nranks, int32_t rank, Shared* shared)
    : name_(std::move(name)), nranks_(nranks), rank_(rank), shared_(shared) {}

Comm::~Comm() { munmap(shared_, sizeof(Shared)); }

Status Comm::Join(const std::string& unique_id, int32_t nranks, int32_t rank, Deadline deadline,
                  const Interrupt& interrupted, std::shared_ptr<Comm>* comm) {
  const std::string name = "/tutti-simnccl-" + Fingerprint(unique_id);
  // The first rank creates and initializes the rendezvous; the others map it once it is ready.
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open " + name);
  if (created && ftruncate(fd, sizeof(Shared)) != 0) {
    close(fd);
    return Errno("ftruncate " + name);
  }
  struct stat st;
  while (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(Shared) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  void* mapped = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return Errno("mmap " + name);
  auto* shared = static_cast<Shared*>(mapped);
  if (created) {
    pthread_mutexattr_t mutex;
    pthread_mutexattr_init(&mutex);
    pthread_mutexattr_setpshared(&mutex, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&mutex, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&shared->mu, &mutex);
    pthread_condattr_t cond;
    pthread_condattr_init(&cond);
    pthread_condattr_setpshared(&cond, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&cond, CLOCK_MONOTONIC);
    pthread_cond_init(&shared->cv, &cond);
    shared->nranks = nranks;
    shared->ready.store(kReady, std::memory_order_release);
  }
  comm->reset(new Comm(name, nranks, rank, shared));
  while (shared->ready.load(std::memory_order_acquire) != kReady) {
    if (Clock::now() >= deadline)
      return errors::CommunicatorNotReady(nranks);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Locked lock(&shared->mu);
  if (shared->nranks != nranks)
    return Status(Code::kInternal, "gpu sim: a communicator of " + std::to_string(shared->nranks) +
                                       " ranks joined as one of " + std::to_string(nranks));
  if (++shared->joined == nranks) {
    shm_unlink(name.c_str());  // every rank mapped it: nothing stays behind in /dev/shm
    pthread_cond_broadcast(&shared->cv);
  }
  while (shared->joined < nranks) {
    Status stop = interrupted ? interrupted() : Status::Ok();
    if (stop.ok() && Clock::now() >= deadline)
      stop = errors::CommunicatorNotReady(nranks);
    if (!stop.ok()) return stop;
    lock.Wait(&shared->cv, std::chrono::milliseconds(2));
  }
  return Status::Ok();
}

void Comm::Abort() {
  aborted_.store(true);
  Locked lock(&shared_->mu);
  shared_->aborted = 1;  // the other ranks' collectives end too, as NCCL's do on a broken peer
  pthread_cond_broadcast(&shared_->cv);
}

Status Comm::Error() const {
  if (failed_code_.load(std::memory_order_acquire) == 0) return Status::Ok();
  return Status(static_cast<Code>(failed_code_.load()), failure_);
}

Status Comm::Fail(Status status) {
  int expected = 0;
  if (failed_code_.load() == 0) {
    failure_ = status.message();
    failed_code_.compare_exchange_strong(expected, static_cast<int>(status.code()));
  }
  return status;
}

Status Comm::Barrier() {
  const auto give_up = Clock::now() + kPatience;
  Locked lock(&shared_->mu);
  const uint64_t generation = shared_->generation;
  if (++shared_->arrived == nranks_) {
    shared_->arrived = 0;
    ++shared_->generation;
    pthread_cond_broadcast(&shared_->cv);
    return Status::Ok();
  }
  while (shared_->generation == generation) {
    if (aborted_.load() || shared_->aborted)
      return Fail(Status(Code::kPeerLost, "the communicator was aborted"));
    if (Clock::now() >= give_up)
      return Fail(Status(Code::kPeerLost, "a peer never reached the collective"));
    lock.Wait(&shared_->cv, std::chrono::milliseconds(2));
  }
  return Status::Ok();
}

Status Comm::Exchange(const Chunks& table, const void* data, size_t bytes, const Reader& read) {
  if (!Error().ok()) return Error();
  const std::string prefix = name_ + "-" + std::to_string(++sequence_) + "-";
  const size_t header = sizeof(uint64_t) * (1 + 2 * table.begin.size());
  {
    Segment own;
    TUTTI_RETURN_IF_ERROR(own.Create(prefix + std::to_string(rank_), header + bytes));
    auto* words = reinterpret_cast<uint64_t*>(own.data());
    words[0] = table.begin.size();
    for (size_t j = 0; j < table.begin.size(); ++j) {
      words[1 + 2 * j] = table.begin[j];
      words[2 + 2 * j] = table.size[j];
    }
    if (bytes) std::memcpy(own.data() + header, data, bytes);
  }
  Status status = Barrier();
  for (int32_t from = 0; status.ok() && from < nranks_; ++from) {
    Segment theirs;
    status = theirs.Open(prefix + std::to_string(from));
    if (!status.ok()) break;
    const auto* words = reinterpret_cast<const uint64_t*>(theirs.data());
    Chunks layout;
    for (uint64_t j = 0; j < words[0]; ++j) {
      layout.begin.push_back(words[1 + 2 * j]);
      layout.size.push_back(words[2 + 2 * j]);
    }
    read(from, layout, theirs.data() + sizeof(uint64_t) * (1 + 2 * words[0]));
  }
  if (status.ok()) status = Barrier();  // everyone read everyone's: the segments may go
  shm_unlink((prefix + std::to_string(rank_)).c_str());
  return status.ok() ? status : Fail(status);
}

Status Comm::Allreduce(const void* send, void* receive, size_t count, DType dtype, ReduceOp op) {
  const size_t bytes = count * ElementSize(dtype);
  std::vector<char> sum(bytes);
  TUTTI_RETURN_IF_ERROR(Exchange({}, send, bytes, [&](int32_t from, const Chunks&, const char* data) {
    if (from == 0)
      std::memcpy(sum.data(), data, bytes);
    else
      ReduceInto(sum.data(), data, count, dtype, op);  // in rank order: the same bits everywhere
  }));
  if (bytes) std::memcpy(receive, sum.data(), bytes);
  return Status::Ok();
}

Status Comm::Broadcast(void* buffer, size_t bytes, int32_t root) {
  return Exchange({}, buffer, rank_ == root ? bytes : 0, [&](int32_t from, const Chunks&, const char* data) {
    if (from == root && from != rank_ && bytes) std::memcpy(buffer, data, bytes);
  });
}

Status Comm::Allgather(void* buffer, const Chunks& chunks) {
  char* at = static_cast<char*>(buffer);
  return Exchange({}, at + chunks.begin[rank_], chunks.size[rank_],
                  [&](int32_t from, const Chunks&, const char* data) {
                    if (from != rank_ && chunks.size[from])
                      std::memcpy(at + chunks.begin[from], data, chunks.size[from]);
                  });
}

Status Comm::ReduceScatter(void* buffer, const Chunks& chunks, int32_t self, DType dtype, ReduceOp op) {
  char* at = static_cast<char*>(buffer);
  const size_t total = chunks.begin.back() + chunks.size.back(), mine = chunks.size[self];
  std::vector<char> sum(mine);
  TUTTI_RETURN_IF_ERROR(Exchange({}, at, total, [&](int32_t from, const Chunks&, const char* data) {
    const char* theirs = data + chunks.begin[self];
    if (from == 0)
      std::memcpy(sum.data(), theirs, mine);
    else
      ReduceInto(sum.data(), theirs, mine / ElementSize(dtype), dtype, op);
  }));
  if (mine) std::memcpy(at + chunks.begin[self], sum.data(), mine);
  return Status::Ok();
}

Status Comm::AllToAll(const void* send, const Chunks& send_chunks, void* receive, const Chunks& recv_chunks) {
  size_t total = 0;
  for (size_t j = 0; j < send_chunks.begin.size(); ++j)
    total = std::max(total, send_chunks.begin[j] + send_chunks.size[j]);
  char* into = static_cast<char*>(receive);
  Status sizes;
  TUTTI_RETURN_IF_ERROR(Exchange(send_chunks, send, total, [&](int32_t from, const Chunks& theirs, const char* data) {
    const size_t size = theirs.size[rank_];
    if (size != recv_chunks.size[from]) {
      sizes = Status(Code::kInternal, "gpu sim: alltoall: rank " + std::to_string(from) + " sent " +
                                          std::to_string(size) + " bytes, " +
                                          std::to_string(recv_chunks.size[from]) + " expected");
      return;
    }
    if (size) std::memcpy(into + recv_chunks.begin[from], data + theirs.begin[rank_], size);
  }));
  return sizes;
}

Status Comm::Pair(int32_t peer) const {
  if (nranks_ == 2 && peer == 1 - rank_) return Status::Ok();
  return Status(Code::kInternal, "gpu sim: point-to-point with rank " + std::to_string(peer) +
                                     " on a communicator of " + std::to_string(nranks_) +
                                     " ranks; the simulator pairs the two ranks of a communicator");
}

// The sender publishes its bytes behind a one-chunk table; the receiver publishes nothing. Either
// finding the other side doing the same fails the communicator, as mismatched NCCL calls would
// never complete.
Status Comm::Send(const void* data, size_t bytes, int32_t peer) {
  TUTTI_RETURN_IF_ERROR(Pair(peer));
  Status paired;
  TUTTI_RETURN_IF_ERROR(Exchange({{0}, {bytes}}, data, bytes, [&](int32_t from, const Chunks& theirs, const char*) {
    if (from == peer && !theirs.size.empty())
      paired = Status(Code::kInternal, "gpu sim: both ranks of a pair sent at once");
  }));
  return paired.ok() ? paired : Fail(paired);
}

Status Comm::Recv(void* buffer, size_t bytes, int32_t peer) {
  TUTTI_RETURN_IF_ERROR(Pair(peer));
  Status paired;
  TUTTI_RETURN_IF_ERROR(Exchange({}, nullptr, 0, [&](int32_t from, const Chunks& theirs, const char* data) {
    if (from != peer) return;
    if (theirs.size.size() != 1 || theirs.size[0] != bytes) {
      paired = Status(Code::kInternal, "gpu sim: recv of " + std::to_string(bytes) +
                                           " bytes met " + (theirs.size.empty() ? std::string("a recv")
                                           : "a send of " + std::to_string(theirs.size[0]) + " bytes"));
      return;
    }
    if (bytes) std::memcpy(buffer, data, bytes);
  }));
  return paired.ok() ? paired : Fail(paired);
}

}  // namespace tutti::gpu::sim
