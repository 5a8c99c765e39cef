// Spec agreement: whether the members that announced a tensor asked for the same collective, and
// the mismatch message naming two variants when they did not. Apart from the negotiator's
// bookkeeping because these rules follow the collectives' semantics (which fields may differ
// between members, which kinds a joined member can sit out) and change with them, not with how
// announcements are collected. Single-threaded, like Negotiator.
#include "server/core/negotiator.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/dtype.h"
#include "proto/status_codec.h"

namespace tutti::server {
namespace {

using wire::KindName;

bool Reduces(wire::CollectiveKind kind) {
  return kind == wire::COLLECTIVE_ALLREDUCE || kind == wire::COLLECTIVE_REDUCESCATTER;
}

// Allgather and alltoall let the first dimension differ between members; the rest must agree.
bool RowsMayDiffer(wire::CollectiveKind kind) {
  return kind == wire::COLLECTIVE_ALLGATHER || kind == wire::COLLECTIVE_ALLTOALL;
}

// Specs agree when every field the collective depends on is equal. The name is the key already.
bool Agree(const wire::TensorSpec& a, const wire::TensorSpec& b) {
  if (a.kind() != b.kind() || a.group() != b.group() || a.group_size() != b.group_size() ||
      a.group_index() != b.group_index())
    return false;
  if (a.kind() == wire::COLLECTIVE_BARRIER) return true;
  const int skip = RowsMayDiffer(a.kind()) ? 1 : 0;
  const bool shapes = a.shape_size() == b.shape_size() &&
                      (a.shape_size() == 0 ||
                       std::equal(a.shape().begin() + skip, a.shape().end(), b.shape().begin() + skip));
  bool reduce = true;
  if (Reduces(a.kind()))
    reduce = a.reduce_op() == b.reduce_op() && a.prescale() == b.prescale() &&
             a.postscale() == b.postscale() &&
             a.compression().SerializeAsString() == b.compression().SerializeAsString();
  const bool root = a.kind() != wire::COLLECTIVE_BROADCAST || a.root() == b.root();
  // Not the device: members use different GPU indices (ChooseDevicePath decides how a collective
  // runs, and refuses one name on the CPU and a GPU with a message of its own).
  return a.dtype() == b.dtype() && shapes && reduce && root;
}

const char* CompressorName(int32_t kind) {
  switch (kind) {
    case 1: return "fp16";
    case 2: return "bf16";
    case 3: return "topk";
    case 4: return "adaptive";
    default: return "unknown";
  }
}

// "fp16", "topk(0.01)", "adaptive(bf16, every 10, >= 65536 bytes, change <= 0.2)".
std::string DescribeCompression(const wire::Compression& c) {
  auto with_ratio = [&](int32_t kind) {
    return kind == 3 ? fmt::format("topk({})", c.ratio()) : std::string(CompressorName(kind));
  };
  if (c.kind() != 4) return with_ratio(c.kind());
  return fmt::format("adaptive({}, every {}, >= {} bytes, change <= {})",
                     with_ratio(c.adaptive_compressor()), c.adaptive_interval(),
                     c.adaptive_min_bytes(), c.adaptive_max_change());
}

}  // namespace

std::string DescribeSpec(const wire::TensorSpec& spec) {
  if (spec.kind() == wire::COLLECTIVE_BARRIER) return "barrier";
  std::string text = fmt::format("{} {}[{}]", KindName(spec.kind()), DTypeName(spec.dtype()),
                                 fmt::join(spec.shape(), ", "));
  if (Reduces(spec.kind())) {
    text += fmt::format(" op={}", ReduceOpName(spec.reduce_op()));
    if (spec.prescale() != 1.0) text += fmt::format(" prescale={}", spec.prescale());
    if (spec.postscale() != 1.0) text += fmt::format(" postscale={}", spec.postscale());
    if (spec.compression().kind() != 0) text += " compression=" + DescribeCompression(spec.compression());
  }
  if (spec.kind() == wire::COLLECTIVE_BROADCAST) text += fmt::format(" root={}", spec.root());
  if (!spec.group().empty())
    text += fmt::format(" in group '{}' ({} of {})", spec.group(), spec.group_index() + 1,
                        spec.group_size());
  if (spec.device_type() != 0 || spec.device_index() != 0)
    text += fmt::format(" device={}:{}", spec.device_type() == 0 ? "cpu" : "cuda",
                        spec.device_index());
  return text;
}

wire::Response Negotiator::Resolve(const std::string& name, const Pending& pending) {
  wire::Response response;
  // Members that joined announced nothing: compare those that did with the first of them.
  size_t reference = 0;
  while (!Announced(pending, reference)) ++reference;
  const wire::TensorSpec& first = SpecOf(pending, reference)->spec;
  *response.mutable_spec() = first;
  // The first member that did not announce (joined), if any.
  int32_t absent = -1;
  if (pending.announced_count < members_.size())
    for (size_t i = 0; i < members_.size() && absent < 0; ++i)
      if (!Announced(pending, i)) absent = members_[i];
  // Every member announced the first variant unless there are several: then the first member, in
  // set order, whose spec disagrees with the reference's is named.
  if (pending.variants.size() > 1)
    for (size_t i = 0; i < members_.size(); ++i) {
      const AnnouncedSpec* other = SpecOf(pending, i);
      if (!other || Agree(first, other->spec)) continue;
      SetError(&response, Code::kMismatch,
               fmt::format("mismatched '{}' on process set {}: rank {} sent {}, rank {} sent {}",
                           name, set_id_, members_[reference], DescribeSpec(first), members_[i],
                           DescribeSpec(other->spec)));
      return response;
    }
  const bool supports_join = first.kind() == wire::COLLECTIVE_ALLREDUCE ||
                             first.kind() == wire::COLLECTIVE_ALLGATHER ||
                             first.kind() == wire::COLLECTIVE_BROADCAST ||
                             first.kind() == wire::COLLECTIVE_BARRIER;
  if (absent >= 0 && !supports_join) {
    SetError(&response, Code::kInvalidArgument,
             fmt::format("{} '{}' cannot run on process set {} while rank {} has joined",
                         KindName(first.kind()), name, set_id_, absent));
    return response;
  }
  if (absent >= 0 && first.kind() == wire::COLLECTIVE_BROADCAST && contains(first.root()) &&
      !Announced(pending, IndexOf(first.root()))) {
    SetError(&response, Code::kInvalidArgument,
             fmt::format("broadcast '{}': root rank {} has joined and has nothing to send", name,
                         first.root()));
    return response;
  }
  const int n = static_cast<int>(members_.size());
  switch (first.kind()) {
    case wire::COLLECTIVE_BROADCAST:
      if (!contains(first.root()))
        SetError(&response, Code::kInvalidArgument,
                 fmt::format("broadcast '{}': root rank {} is not a member of process set {}", name,
                             first.root(), set_id_));
      break;
    case wire::COLLECTIVE_ALLGATHER:
      for (size_t i = 0; i < members_.size(); ++i) {  // a joined member gives no rows
        const AnnouncedSpec* spec = SpecOf(pending, i);
        response.add_member_rows(!spec ? 0 : spec->spec.shape_size() > 0 ? spec->spec.shape(0) : 1);
      }
      break;
    case wire::COLLECTIVE_ALLTOALL:
      for (size_t i = 0; i < members_.size(); ++i) {
        const wire::TensorSpec& spec = SpecOf(pending, i)->spec;
        if (spec.splits_size() != n) {
          SetError(&response, Code::kInvalidArgument,
                   fmt::format("alltoall '{}': rank {} gave {} splits for a set of {} ranks", name,
                               members_[i], spec.splits_size(), n));
          return response;
        }
        response.mutable_member_rows()->Add(spec.splits().begin(), spec.splits().end());
      }
      break;
    default:
      break;
  }
  if (!wire::Failed(response)) ChooseDevicePath(name, pending, &response);
  return response;
}

}  // namespace tutti::server
