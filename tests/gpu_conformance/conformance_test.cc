// What the GPU module promises the rest of tutti (gpu/module_api.h), checked against whichever
// module TUTTI_CONFORMANCE_MODULE names: the simulator (tests/gpu_sim, every CI run) or
// libtutti_cuda.so on a GPU (tests/gpu/device_check.sh). Only the module interface is used, so the
// two runs test the same thing: device placement and memory round trips, the copy kernels'
// transforms bit for bit (float16 scaled in float16, integers in double), stream and event order
// across process sets and the default stream, buffers, NCCL ids, and the errors and their
// messages. Without a usable device every test skips, naming the module's reason.
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/kernels/half.h"
#include "gpu/module_api.h"

namespace tutti {
// Test names and failure messages say "float16", not the enum's bytes.
inline void PrintTo(DType dtype, std::ostream* out) { *out << DTypeName(static_cast<int32_t>(dtype)); }
}  // namespace tutti

namespace tutti::gpu {
namespace {

const auto kLong = std::chrono::seconds(60);

// The module under test, loaded once.
struct Loaded {
  Module* module = nullptr;
  std::string path, error;
  bool simulator = false;
};

const Loaded& Load() {
  static const Loaded loaded = [] {
    Loaded l;
    const char* path = std::getenv("TUTTI_CONFORMANCE_MODULE");
    l.path = path ? path : "";
    if (l.path.empty()) {
      l.error = "TUTTI_CONFORMANCE_MODULE is not set";
      return l;
    }
    void* handle = dlopen(l.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      l.error = std::string("dlopen: ") + dlerror();
      return l;
    }
    using Open = int (*)(int, Module**, char*, size_t);
    auto open = reinterpret_cast<Open>(dlsym(handle, "tutti_gpu_module_open"));
    char error[256] = {};
    if (!open || open(kModuleApi, &l.module, error, sizeof error) != 0) {
      l.error = open ? error : "no tutti_gpu_module_open";
      l.module = nullptr;
    }
    l.simulator = dlsym(handle, "tutti_sim_pause") != nullptr;
    return l;
  }();
  return loaded;
}

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const Loaded& l = Load();
    ASSERT_NE(l.module, nullptr) << l.path << ": " << l.error;
    module_ = l.module;
    Status usable = module_->CheckDevice(0);
    if (!usable.ok()) GTEST_SKIP() << "no usable device 0: " << usable.message();
    ASSERT_TRUE(module_->OpenProcessSet(0, &set_).ok());
  }

  // Device memory holding `bytes`, freed by the fixture.
  void* ToDevice(const void* bytes, size_t size) {
    void* device = nullptr;
    EXPECT_TRUE(set_->AllocateResult(size, &device).ok());
    allocations_.push_back(device);
    EXPECT_TRUE(set_->CopyBytes(device, bytes, size).ok());
    Sync();
    return device;
  }
  std::vector<char> FromDevice(const void* device, size_t size) {
    std::vector<char> host(size);
    EXPECT_TRUE(set_->CopyBytes(host.data(), device, size).ok());
    Sync();
    return host;
  }
  void Sync(ProcessSetOnDevice* on = nullptr) {
    on = on ? on : set_.get();
    std::shared_ptr<Event> done;
    ASSERT_TRUE(on->Record(&done).ok());
    Status waited = on->Wait(*done, Clock::now() + kLong, nullptr);
    ASSERT_TRUE(waited.ok()) << waited.message();
  }
  void TearDown() override {
    for (void* p : allocations_) module_->Free(0, p);
  }

  Module* module_ = nullptr;
  std::unique_ptr<ProcessSetOnDevice> set_;
  std::vector<void*> allocations_;
};

// ---- devices --------------------------------------------------------------------------------

TEST_F(Conformance, DevicesAreCountedAndAMissingOneIsNamedWithTheCount) {
  int count = 0;
  while (count < 64 && module_->CheckDevice(count).ok()) ++count;
  ASSERT_GE(count, 1);
  for (int missing : {count, -1}) {
    Status status = module_->CheckDevice(missing);
    EXPECT_EQ(status.code(), Code::kDeviceUnavailable);
    EXPECT_EQ(status.message(), "CUDA device " + std::to_string(missing) +
                                    " does not exist: this process sees " + std::to_string(count) +
                                    " (CUDA_VISIBLE_DEVICES renumbers them from 0)");
  }
  EXPECT_FALSE(module_->Describe().empty());
  EXPECT_GE(module_->NcclVersion(), 0);
}

TEST_F(Conformance, UuidsAreSixteenStableBytesAndDifferAcrossDevices) {
  std::string a, again, b;
  ASSERT_TRUE(module_->DeviceUuid(0, &a).ok());
  ASSERT_TRUE(module_->DeviceUuid(0, &again).ok());
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, again);
  if (module_->CheckDevice(1).ok()) {
    ASSERT_TRUE(module_->DeviceUuid(1, &b).ok());
    EXPECT_NE(a, b);
  }
}

// ---- memory ---------------------------------------------------------------------------------

TEST_F(Conformance, BytesRoundTripThroughDeviceAndStagingMemory) {
  std::vector<char> host(1 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<char>(i * 7 + 3);
  void* device = ToDevice(host.data(), host.size());
  EXPECT_EQ(FromDevice(device, host.size()), host);
  // Staging memory is host memory the host reads and writes directly.
  void* staging = nullptr;
  ASSERT_TRUE(set_->StagingBuffer(host.size(), &staging).ok());
  ASSERT_TRUE(set_->CopyBytes(staging, device, host.size()).ok());
  Sync();
  EXPECT_EQ(std::memcmp(staging, host.data(), host.size()), 0);
  // The fusion buffer is device memory of at least the size asked, growing on demand.
  void* fusion = nullptr;
  ASSERT_TRUE(set_->FusionBuffer(16, &fusion).ok());
  ASSERT_TRUE(set_->FusionBuffer(host.size(), &fusion).ok());
  ASSERT_TRUE(set_->CopyBytes(fusion, staging, host.size()).ok());
  EXPECT_EQ(FromDevice(fusion, host.size()), host);
  void* empty = reinterpret_cast<void*>(1);
  ASSERT_TRUE(set_->AllocateResult(0, &empty).ok());
  EXPECT_EQ(empty, nullptr);
}

// ---- the copy kernels' transforms, bit for bit ------------------------------------------------

// The reference: module_api.h's CopyTransform, element by element.
template <typename T>
T ScaleInteger(T x, const CopyTransform& t) {
  if (t.divisor == -1)
    x = static_cast<T>(0 - static_cast<unsigned long long>(x));
  else if (t.divisor != 1)
    x = static_cast<T>(static_cast<int64_t>(x) / t.divisor);
  if (t.scale == 1.0) return x;
  const double y = static_cast<double>(x) * t.scale;
  if (y != y) return T(0);
  if (y >= (static_cast<double>(std::numeric_limits<T>::max() / 2) + 1) * 2) return std::numeric_limits<T>::max();
  if (y <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  return static_cast<T>(y);
}

template <typename T>
void Apply(const char* in, char* out, const CopyTransform& t) {
  T x;
  std::memcpy(&x, in, sizeof x);
  x = ScaleInteger<T>(x, t);
  std::memcpy(out, &x, sizeof x);
}

std::vector<char> Reference(DType dtype, const std::vector<char>& in, const CopyTransform& t) {
  std::vector<char> out(in.size());
  const size_t size = ElementSize(dtype);
  for (size_t at = 0; at < in.size(); at += size) {
    const char* x = in.data() + at;
    char* y = out.data() + at;
    switch (dtype) {
      case DType::kFloat16: {
        uint16_t h;
        std::memcpy(&h, x, 2);
        // float16 in float16: the scale made a half through float, the product rounded once.
        const float scale = HalfToFloat(FloatToHalf(static_cast<float>(t.scale)));
        h = FloatToHalf(HalfToFloat(h) * scale);
        std::memcpy(y, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t b;
        std::memcpy(&b, x, 2);
        b = FloatToBFloat16(BFloat16ToFloat(b) * static_cast<float>(t.scale));
        std::memcpy(y, &b, 2);
        break;
      }
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, x, 4);
        f *= static_cast<float>(t.scale);
        std::memcpy(y, &f, 4);
        break;
      }
      case DType::kFloat64: {
        double d;
        std::memcpy(&d, x, 8);
        d *= t.scale;
        std::memcpy(y, &d, 8);
        break;
      }
      case DType::kInt8: Apply<int8_t>(x, y, t); break;
      case DType::kUInt8: Apply<uint8_t>(x, y, t); break;
      case DType::kInt16: Apply<int16_t>(x, y, t); break;
      case DType::kInt32: Apply<int32_t>(x, y, t); break;
      case DType::kInt64: Apply<int64_t>(x, y, t); break;
      case DType::kBool: *y = t.normalize_bool ? (*x != 0) : *x; break;
    }
  }
  return out;
}

// Inputs that exercise rounding: for floats, values with full mantissas and signs; for integers,
// values near the type's limits.
std::vector<char> Inputs(DType dtype, size_t n) {
  std::vector<char> bytes(n * ElementSize(dtype));
  uint64_t state = 0x9e3779b97f4a7c15ull * (static_cast<int>(dtype) + 1);
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = state >> 11;
    char* at = bytes.data() + i * ElementSize(dtype);
    const double f = (static_cast<double>(r % 2000001) - 1000000.0) / 997.0;  // about ±1003
    switch (dtype) {
      case DType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(f / 16)); std::memcpy(at, &h, 2); break; }
      case DType::kBFloat16: { uint16_t b = FloatToBFloat16(static_cast<float>(f)); std::memcpy(at, &b, 2); break; }
      case DType::kFloat32: { float v = static_cast<float>(f); std::memcpy(at, &v, 4); break; }
      case DType::kFloat64: std::memcpy(at, &f, 8); break;
      case DType::kBool: *at = static_cast<char>(r % 3 == 0 ? 0 : r % 256); break;
      default: std::memcpy(at, &r, ElementSize(dtype)); break;  // any bit pattern, limits included
    }
  }
  return bytes;
}

struct Case {
  const char* name;
  CopyTransform transform;
};

std::vector<Case> Transforms(DType dtype) {
  if (dtype == DType::kBool) {
    CopyTransform normalize;
    normalize.normalize_bool = true;
    return {{"identity", {}}, {"normalize", normalize}};
  }
  std::vector<Case> cases = {{"identity", {}},
                             {"third", {1.0 / 3, 1, false}},
                             {"tenth", {0.1, 1, false}},
                             {"two and a half", {2.5, 1, false}},
                             {"minus one", {-1.0, 1, false}},
                             {"thousand", {1000.0, 1, false}}};
  if (!IsFloating(dtype)) {
    cases.push_back({"average of 3", {1.0, 3, false}});
    cases.push_back({"average of 2, then 3", {3.0, 2, false}});
    cases.push_back({"NaN", {std::nan(""), 1, false}});
  }
  return cases;
}

class CopyTransforms : public Conformance, public ::testing::WithParamInterface<DType> {};

TEST_P(CopyTransforms, GiveTheReferenceBitsInManySegmentsAndInPlace) {
  const DType dtype = GetParam();
  const size_t element = ElementSize(dtype);
  // 1,100 segments (more than one launch of the CUDA kernel), lengths 0 to 300, plus one large.
  std::vector<size_t> lengths;
  for (size_t s = 0; s < 1100; ++s) lengths.push_back((s * 37) % 301);
  lengths.push_back(1 << 18);
  size_t total = 0;
  for (size_t n : lengths) total += n;
  const std::vector<char> input = Inputs(dtype, total);
  void* source = ToDevice(input.data(), input.size());
  void* destination = nullptr;
  ASSERT_TRUE(set_->AllocateResult(input.size(), &destination).ok());
  allocations_.push_back(destination);
  for (const Case& c : Transforms(dtype)) {
    std::vector<CopySegment> segments;
    size_t at = 0;
    for (size_t n : lengths) {
      segments.push_back({static_cast<char*>(source) + at * element,
                          static_cast<char*>(destination) + at * element, n});
      at += n;
    }
    ASSERT_TRUE(set_->Copy(segments, dtype, c.transform).ok()) << c.name;
    const std::vector<char> expected = Reference(dtype, input, c.transform);
    const std::vector<char> got = FromDevice(destination, input.size());
    size_t first_difference = 0;
    while (first_difference < got.size() && got[first_difference] == expected[first_difference]) ++first_difference;
    EXPECT_EQ(first_difference, got.size())
        << DTypeName(static_cast<int32_t>(dtype)) << ", " << c.name << ": first different byte at "
        << first_difference;
  }
  // In place: a segment may copy onto itself.
  const Case last = Transforms(dtype).back();
  void* in_place = ToDevice(input.data(), input.size());
  ASSERT_TRUE(set_->Copy({{in_place, in_place, total}}, dtype, last.transform).ok());
  EXPECT_TRUE(FromDevice(in_place, input.size()) == Reference(dtype, input, last.transform))
      << "in place, " << last.name;
}

std::string DTypeLabel(const ::testing::TestParamInfo<DType>& info) {
  return DTypeName(static_cast<int32_t>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryDType, CopyTransforms,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                           DType::kFloat64, DType::kInt8, DType::kUInt8,
                                           DType::kInt32, DType::kInt64, DType::kInt16, DType::kBool),
                         DTypeLabel);

// The two rows of Horovod's test_horovod_allreduce_prescale that failed on the H200 by one ulp:
// float16 scaled by a factor that float16 cannot hold.
TEST_F(Conformance, Float16IsScaledInFloat16AsHorovodDoes) {
  const uint16_t x = FloatToHalf(3.0f);
  void* device = ToDevice(&x, 2);
  CopyTransform transform;
  transform.scale = 0.1;  // float16(0.1) = 0.0999755859375
  ASSERT_TRUE(set_->Copy({{device, device, 1}}, DType::kFloat16, transform).ok());
  uint16_t y;
  std::memcpy(&y, FromDevice(device, 2).data(), 2);
  // 3 x 0.0999755859375 is a tie between two halves, rounded to the even one: 0.2998046875. In
  // float32 math (the CPU path's) 3 x 0.1 rounds to 0.300048828125 instead.
  EXPECT_EQ(y, FloatToHalf(3.0f * HalfToFloat(FloatToHalf(0.1f))));
  EXPECT_EQ(HalfToFloat(y), 0.2998046875f);
  EXPECT_NE(y, FloatToHalf(3.0f * 0.1f));
}

// ---- streams and events -----------------------------------------------------------------------

// One set's work ordered after another's event: the second copy reads what the first wrote.
TEST_F(Conformance, AnEventOrdersOneSetsStreamAfterAnothers) {
  std::unique_ptr<ProcessSetOnDevice> other;
  ASSERT_TRUE(module_->OpenProcessSet(0, &other).ok());
  const size_t n = 1 << 20;
  std::vector<float> ones(n, 1.0f);
  void* a = ToDevice(ones.data(), n * 4);
  std::vector<float> zeros(n, 0.0f);
  void* b = ToDevice(zeros.data(), n * 4);
  void* c = ToDevice(zeros.data(), n * 4);
  for (int round = 0; round < 20; ++round) {
    CopyTransform times;
    times.scale = round + 2;
    ASSERT_TRUE(set_->Copy({{a, b, n}}, DType::kFloat32, times).ok());
    std::shared_ptr<Event> written;
    ASSERT_TRUE(set_->Record(&written).ok());
    ASSERT_TRUE(other->After(*written).ok());
    ASSERT_TRUE(other->CopyBytes(c, b, n * 4).ok());
    Sync(other.get());
    std::vector<char> got = FromDevice(c, n * 4);
    std::vector<float> values(n);
    std::memcpy(values.data(), got.data(), n * 4);
    ASSERT_EQ(values.front(), round + 2.0f) << round;
    ASSERT_EQ(values.back(), round + 2.0f) << round;
  }
}

// The application's stream (here the default one) ordered after a set's work, and the set's work
// after the application's: what producer events and tutti_request_stream_wait do.
TEST_F(Conformance, TheApplicationsStreamAndASetsStreamOrderBothWays) {
  const size_t n = 1 << 16;
  std::vector<int32_t> values(n, 7);
  void* device = ToDevice(values.data(), n * 4);
  std::shared_ptr<Event> produced;
  ASSERT_TRUE(module_->RecordEvent(0, nullptr, &produced).ok());
  ASSERT_TRUE(set_->After(*produced).ok());
  CopyTransform doubled;
  doubled.scale = 2;
  ASSERT_TRUE(set_->Copy({{device, device, n}}, DType::kInt32, doubled).ok());
  std::shared_ptr<Event> done;
  ASSERT_TRUE(set_->Record(&done).ok());
  ASSERT_TRUE(module_->StreamWait(nullptr, *done).ok());
  std::shared_ptr<Event> consumer;
  ASSERT_TRUE(module_->RecordEvent(0, nullptr, &consumer).ok());
  // Any set may host-wait for any event of its device, the default stream's included.
  ASSERT_TRUE(set_->Wait(*consumer, Clock::now() + kLong, nullptr).ok());
  std::vector<char> got = FromDevice(device, n * 4);
  std::memcpy(values.data(), got.data(), n * 4);
  EXPECT_EQ(values.front(), 14);
  EXPECT_EQ(values.back(), 14);
}

TEST_F(Conformance, AWaitOnFinishedWorkSucceedsPastItsDeadlineAndBeforeItsInterrupt) {
  std::shared_ptr<Event> done;
  ASSERT_TRUE(set_->Record(&done).ok());
  Sync();
  Status waited = set_->Wait(*done, Clock::now() - std::chrono::seconds(1),
                             [] { return Status(Code::kAborted, "interrupted"); });
  EXPECT_TRUE(waited.ok()) << waited.message();
}

// Only the simulator lets a test hold a stream's work: what a GPU does while a kernel runs long.
TEST_F(Conformance, WorkIsQueuedNotDoneAndAWaitEndsAtItsInterruptOrDeadline) {
  if (!Load().simulator) GTEST_SKIP() << "needs a stream the test can hold (the simulator's)";
  using Pause = void (*)(int);
  auto pause = reinterpret_cast<Pause>(dlsym(dlopen(Load().path.c_str(), RTLD_NOW | RTLD_NOLOAD), "tutti_sim_pause"));
  ASSERT_NE(pause, nullptr);
  int32_t value = 5, copy = 0;
  pause(1);
  ASSERT_TRUE(set_->CopyBytes(&copy, &value, 4).ok());
  std::shared_ptr<Event> done;
  ASSERT_TRUE(set_->Record(&done).ok());
  EXPECT_EQ(copy, 0);  // queued, not done
  Status interrupted = set_->Wait(*done, Clock::now() + kLong,
                                  [] { return Status(Code::kAborted, "the lane was aborted"); });
  EXPECT_EQ(interrupted.code(), Code::kAborted);
  EXPECT_EQ(interrupted.message(), "the lane was aborted");
  Status late = set_->Wait(*done, Clock::now() + std::chrono::milliseconds(20), nullptr);
  EXPECT_EQ(late.code(), Code::kTimeout);
  EXPECT_EQ(late.message(), "the device work did not finish before the deadline");
  pause(0);
  EXPECT_TRUE(set_->Wait(*done, Clock::now() + kLong, nullptr).ok());
  EXPECT_EQ(copy, 5);
}

// ---- NCCL ids and communicators ------------------------------------------------------------

TEST_F(Conformance, UniqueIdsAre128FreshBytes) {
  std::string a, b;
  ASSERT_TRUE(module_->UniqueId(&a).ok());
  ASSERT_TRUE(module_->UniqueId(&b).ok());
  EXPECT_EQ(a.size(), 128u);
  EXPECT_NE(a, b);
}

// A communicator of one rank (all one GPU allows): made from a fresh id, every collective gives
// the rank's own data back, in place or not, and int16 is not reduced.
TEST_F(Conformance, AOneRankCommunicatorRunsEveryCollective) {
  std::string id;
  ASSERT_TRUE(module_->UniqueId(&id).ok());
  Status made = set_->InitComm(3, id, 1, 0, Clock::now() + kLong, nullptr);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_TRUE(set_->HasComm(3));
  EXPECT_FALSE(set_->HasComm(0));
  set_->Bound(Clock::now() + kLong, nullptr);
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) / 3;
  const size_t bytes = values.size() * 4;
  void* a = ToDevice(values.data(), bytes);
  void* b = ToDevice(std::vector<float>(values.size(), 0).data(), bytes);
  const auto host = [&](void* device) {
    std::vector<float> out(values.size());
    std::memcpy(out.data(), FromDevice(device, bytes).data(), bytes);
    return out;
  };
  ASSERT_TRUE(set_->Allreduce(3, a, b, values.size(), DType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(host(b), values);
  ASSERT_TRUE(set_->Allreduce(3, a, a, values.size(), DType::kFloat32, ReduceOp::kMax).ok());
  EXPECT_EQ(host(a), values);
  ASSERT_TRUE(set_->Broadcast(3, a, bytes, 0).ok());
  EXPECT_EQ(host(a), values);
  const Chunks whole{{0}, {bytes}};
  ASSERT_TRUE(set_->Allgather(3, a, whole).ok());
  EXPECT_EQ(host(a), values);
  ASSERT_TRUE(set_->ReduceScatter(3, a, whole, 0, DType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(host(a), values);
  ASSERT_TRUE(set_->AllToAll(3, a, whole, b, whole).ok());
  EXPECT_EQ(host(b), values);
  Sync();
  Status int16 = set_->Allreduce(3, a, a, 4, DType::kInt16, ReduceOp::kSum);
  EXPECT_EQ(int16.code(), Code::kUnsupported);
  EXPECT_EQ(int16.message(), "NCCL cannot reduce int16 (it has no 16-bit integer type)");
  Status missing = set_->Allreduce(7, a, a, 4, DType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(missing.code(), Code::kInternal);
  EXPECT_EQ(missing.message(), "no NCCL communicator for device group 7");
}

TEST_F(Conformance, ACommunicatorFromAnIdOfTheWrongSizeIsRefused) {
  EXPECT_FALSE(set_->HasComm(0));
  Status status = set_->InitComm(0, "short", 2, 0, Clock::now() + kLong, nullptr);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_EQ(status.message(), "an NCCL unique id of 5 bytes arrived; NCCL needs 128");
  EXPECT_FALSE(set_->HasComm(0));
}

// Point-to-point on a communicator of two devices (what a pair of ranks on their own GPUs makes,
// docs/gpu.md "Send and recv"): the two sides' calls pair up in the order each made them.
TEST_F(Conformance, APairCommunicatorOfTwoDevicesPairsSendsAndRecvsInOrder) {
  if (!module_->CheckDevice(1).ok()) GTEST_SKIP() << "needs a second device";
  ASSERT_TRUE(module_->PointToPointOnNccl());
  std::unique_ptr<ProcessSetOnDevice> other;
  ASSERT_TRUE(module_->OpenProcessSet(1, &other).ok());
  std::string id;
  ASSERT_TRUE(module_->UniqueId(&id).ok());
  Status joined;
  std::thread peer([&] { joined = other->InitComm(0, id, 2, 1, Clock::now() + kLong, nullptr); });
  Status made = set_->InitComm(1, id, 2, 0, Clock::now() + kLong, nullptr);
  peer.join();
  ASSERT_TRUE(made.ok()) << made.message();
  ASSERT_TRUE(joined.ok()) << joined.message();
  const size_t bytes = 4096;
  std::vector<char> first(bytes), second(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    first[i] = static_cast<char>(i * 7);
    second[i] = static_cast<char>(i * 13 + 1);
  }
  void* sources[] = {ToDevice(first.data(), bytes), ToDevice(second.data(), bytes)};
  void* targets[2] = {};
  for (void*& target : targets) ASSERT_TRUE(other->AllocateResult(bytes, &target).ok());
  set_->Bound(Clock::now() + kLong, nullptr);
  other->Bound(Clock::now() + kLong, nullptr);
  // Each side from a thread of its own, as each rank calls: NCCL may connect a pair while it
  // queues the pair's first call, which needs both sides there.
  Status received;
  std::thread receiver([&] {
    for (int k = 0; k < 2 && received.ok(); ++k) received = other->Recv(0, targets[k], bytes, 0);
  });
  Status sent;
  for (int k = 0; k < 2 && sent.ok(); ++k) sent = set_->Send(1, sources[k], bytes, 1);
  receiver.join();
  ASSERT_TRUE(sent.ok()) << sent.message();
  ASSERT_TRUE(received.ok()) << received.message();
  Sync();
  Sync(other.get());
  std::vector<char> got(bytes);
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(other->CopyBytes(got.data(), targets[k], bytes).ok());
    Sync(other.get());
    EXPECT_EQ(got, k == 0 ? first : second) << "message " << k;
    module_->Free(1, targets[k]);
  }
}

}  // namespace
}  // namespace tutti::gpu
