// libFuzzer target: one frame as a rank would send it to tuttid, through the decoder and
// validator that every frame passes before the coordinator looks at it (server/core/message_codec.h).
// A frame that passes must hold only values the rest of the server uses without further checks:
// the properties below are what job.cc, negotiator.cc and fusion.cc rely on.
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <cstdlib>

#include <google/protobuf/stubs/common.h>

#include "common/dtype.h"
#include "proto/versions.h"
#include "server/core/message_codec.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    fprintf(stderr, "fuzz_client_frame: a frame passed validation but %s\n", what);
    abort();
  }
}

// What Clock::now() + milliseconds(ms) needs: the deadline fits the clock's nanoseconds with
// centuries to spare (steady_clock counts from boot).
bool DeadlineFits(int64_t ms) {
  return ms <= std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::duration::max()).count() / 4;
}

// The product of `dims`, or -1 if it overflows.
int64_t Product(const int64_t* begin, const int64_t* end, int64_t product = 1) {
  for (const int64_t* d = begin; d != end; ++d)
    if (__builtin_mul_overflow(product, *d, &product)) return -1;
  return product;
}

void CheckSpec(const tutti::wire::TensorSpec& spec) {
  using namespace tutti;
  Check(!spec.name().empty(), "a tensor has no name");
  if (spec.kind() == wire::COLLECTIVE_BARRIER) return;
  Check(IsValidDType(spec.dtype()), "a tensor has an unknown dtype");
  // negotiator.cc's device paths: a known device type, an index >= 0, no uuid or 16 bytes.
  Check(spec.device_type() == 0 || spec.device_type() == 1, "a tensor has an unknown device type");
  Check(spec.device_index() >= 0, "a device index is negative");
  Check(spec.device_uuid().empty() || spec.device_uuid().size() == server::kDeviceUuidBytes,
        "a GPU uuid has another length than 16 bytes");
  for (int64_t dim : spec.shape()) Check(dim >= 0, "a dimension is negative");
  // Byte sizes computed from a valid shape never overflow: the whole tensor's, and (allgather,
  // fusion.cc) the rows after the first dimension times the element size.
  const int64_t* dims = spec.shape().data();
  const int n = spec.shape_size();
  const int64_t element = static_cast<int64_t>(ElementSize(static_cast<DType>(spec.dtype())));
  Check(Product(dims, dims + n, element) >= 0, "the tensor's byte size overflows");
  Check(n == 0 || Product(dims + 1, dims + n, element) >= 0, "the byte size of one row overflows");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every string field that is not UTF-8; the parse failing is what matters.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tutti;
  wire::Frame frame;
  Status status = server::DecodeClientFrame(data, size, &frame);
  if (!status.ok()) {
    Check(!status.message().empty(), "a refusal has no message");
    return 0;
  }
  // tuttid serves its own protocol and the previous one (proto/versions.h).
  Check(frame.magic() == wire::kMagic && wire::CheckRankVersion(frame.version()).ok(),
        "magic or version is wrong");
  // HA messages exist since protocol 6: a rank of 6 may send them to a tuttid of 7, not one of 5.
  Check(frame.version() >= wire::kFirstHaProtocolVersion ||
            (!frame.has_resume() && !frame.has_cache_state()),
        "an HA-only message passed with a protocol older than HA groups");
  if (frame.has_register_() || frame.has_resume()) {
    // A Resume repeats the registration its rank joined with: it passes the same checks.
    const auto& r = frame.has_register_() ? frame.register_() : frame.resume().register_();
    // An elastic registration may number a rank to add at or above the size (docs/elastic.md).
    Check(r.size() >= 1 && r.rank() >= 0 && (r.rank() < r.size() || r.elastic()),
          "the rank is outside the world");
    Check(r.max_size() >= 0 && r.max_size() <= tutti::server::kMaxWorldSize,
          "the maximum size is outside [0, kMaxWorldSize]");
    Check(DeadlineFits(r.rendezvous_timeout_ms()), "the rendezvous deadline overflows the clock");
    Check(DeadlineFits(r.stall_warning_ms()) && DeadlineFits(r.stall_shutdown_ms()),
          "a stall threshold overflows the clock");
  }
  if (frame.has_set_add()) Check(DeadlineFits(frame.set_add().timeout_ms()), "a deadline overflows");
  if (frame.has_set_remove())
    Check(DeadlineFits(frame.set_remove().timeout_ms()), "a deadline overflows");
  if (frame.has_join()) Check(DeadlineFits(frame.join().timeout_ms()), "a deadline overflows");
  if (frame.has_announce()) {
    for (const auto& set : frame.announce().sets())
      for (const auto& spec : set.tensors()) {
        // The announced tensors one by one, as the negotiator sees them.
        Check(server::ValidateTensorSpec(spec).ok(), "a tensor fails ValidateTensorSpec alone");
        CheckSpec(spec);
      }
  }
  // What passed re-encodes: the coordinator copies these messages into its answers.
  std::string again = frame.SerializeAsString();
  wire::Frame reparsed;
  Check(server::DecodeClientFrame(again.data(), again.size(), &reparsed).ok(),
        "its re-encoding does not pass");
  return 0;
}
