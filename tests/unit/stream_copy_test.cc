// StreamCopy (client/kernels/stream_copy.h): memcpy's bytes at every alignment of source and
// destination (offsets 0..63, so every head and tail of a 64-byte line), lengths around a line
// and around kStreamingStoreMinBytes, nothing written outside the span; and the relay's streamed
// last reduce step (ScaleReduce into a scratch span, then StreamCopy) bit for bit ScaleReduce
// into the output for every dtype and op.
#include "client/kernels/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "client/kernels/reduce.h"

namespace tutti {
namespace {

std::vector<char> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> bytes(n);
  for (char& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

// Copies `len` bytes from src + src_offset to dst + dst_offset (both buffers 64-byte aligned
// plus the offsets) and checks the span and the guard bytes around it.
void ExpectCopies(size_t len, size_t dst_offset, size_t src_offset, uint64_t seed) {
  constexpr size_t kGuard = 128;
  const std::vector<char> source = RandomBytes(len + src_offset + 64, seed);
  std::vector<char> dst_storage(len + dst_offset + kGuard + 64, static_cast<char>(0x5A));
  char* base = dst_storage.data() + (64 - reinterpret_cast<uintptr_t>(dst_storage.data()) % 64) % 64;
  std::vector<char> src_storage(source.size() + 64);
  char* src = src_storage.data() + (64 - reinterpret_cast<uintptr_t>(src_storage.data()) % 64) % 64 +
              src_offset;
  std::memcpy(src, source.data(), len);
  char* dst = base + dst_offset;
  StreamCopy(dst, src, len);
  StreamFence();
  ASSERT_EQ(0, std::memcmp(dst, src, len)) << len << " bytes at +" << dst_offset << " from +" << src_offset;
  for (char* p = dst_storage.data(); p < dst; ++p) ASSERT_EQ(*p, 0x5A) << "written before the span";
  for (char* p = dst + len; p < dst_storage.data() + dst_storage.size(); ++p)
    ASSERT_EQ(*p, 0x5A) << "written after the span";
}

TEST(StreamCopyTest, EveryHeadAndTailOfALine) {
  for (size_t dst_offset = 0; dst_offset < 64; ++dst_offset)
    for (size_t len : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 191, 200, 4096 + 33})
      ExpectCopies(len, dst_offset, (dst_offset * 7 + len) % 64, dst_offset * 1000 + len);
}

TEST(StreamCopyTest, EverySourceAlignment) {
  for (size_t src_offset = 0; src_offset < 64; ++src_offset)
    for (size_t dst_offset : {0, 1, 8, 32, 63}) ExpectCopies(1000, dst_offset, src_offset, src_offset);
}

TEST(StreamCopyTest, LengthsAroundTheThreshold) {
  for (size_t len : {kStreamingStoreMinBytes - 1, kStreamingStoreMinBytes, kStreamingStoreMinBytes + 65})
    for (size_t dst_offset : {0, 3, 48}) ExpectCopies(len, dst_offset, 5, len + dst_offset);
}

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                             DType::kInt8,    DType::kUInt8,    DType::kInt32,   DType::kInt64,
                             DType::kInt16,   DType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProduct};

// Random bits, but floating values finite-ish and bool bytes 0..2, as the kernels expect.
std::vector<char> Operand(DType dtype, size_t count, uint64_t seed) {
  std::vector<char> bytes = RandomBytes(count * ElementSize(dtype), seed);
  if (dtype == DType::kBool)
    for (char& b : bytes) b = static_cast<char>(static_cast<unsigned char>(b) % 3);
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
      dtype == DType::kBFloat16) {
    std::mt19937_64 rng(seed);
    std::vector<float> f(count);
    for (float& x : f) x = static_cast<float>(static_cast<int64_t>(rng() % 20001) - 10000) / 7.0f;
    for (size_t j = 0; j < count; ++j) {
      char* at = bytes.data() + j * ElementSize(dtype);
      if (dtype == DType::kFloat32) std::memcpy(at, &f[j], 4);
      else if (dtype == DType::kFloat64) { const double d = f[j] / 3.0; std::memcpy(at, &d, 8); }
      else {  // the upper half of a float32 is a bfloat16; scaled down it is a float16 too
        const float g = dtype == DType::kFloat16 ? f[j] / 64 : f[j];
        uint32_t u;
        std::memcpy(&u, &g, 4);
        const uint16_t h = static_cast<uint16_t>(u >> 16);
        std::memcpy(at, &h, 2);
      }
    }
  }
  return bytes;
}

TEST(StreamCopyTest, StreamedReduceEqualsScaleReduceForEveryDTypeAndOp) {
  for (DType dtype : kDTypes)
    for (ReduceOp op : kOps)
      for (double factor : {1.0, 0.3}) {
        if (dtype == DType::kBool && (op == ReduceOp::kAverage || factor != 1.0)) continue;
        const size_t element = ElementSize(dtype);
        for (size_t count : {size_t{1}, size_t{33}, size_t{1000}, (size_t{1} << 16) + 3})
          for (size_t offset_elements : {0, 1, 3, 7}) {
            const std::vector<char> own = Operand(dtype, count, count + 1);
            const std::vector<char> in = Operand(dtype, count, count + 2);
            const size_t offset = offset_elements * element;
            std::vector<char> want(count * element + offset), got(count * element + offset, 1);
            ScaleReduce(want.data() + offset, own.data(), in.data(), count, dtype, op, factor);
            std::vector<char> scratch(count * element);
            ScaleReduce(scratch.data(), own.data(), in.data(), count, dtype, op, factor);
            StreamCopy(got.data() + offset, scratch.data(), count * element);
            StreamFence();
            ASSERT_EQ(0, std::memcmp(want.data() + offset, got.data() + offset, count * element))
                << DTypeName(static_cast<int32_t>(dtype)) << " op " << static_cast<int>(op)
                << " x" << factor << " of " << count << " at +" << offset;
          }
      }
}

}  // namespace
}  // namespace tutti
