#include "client/submission_checks.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "client/exec/gpu_module_loader.h"
#include "common/dtype.h"

namespace tutti::client {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// Shortest text that reads back as `value` ("0.5", "1e-09").
std::string FormatNumber(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string DeviceName(const TensorArgs& t) {
  return t.device_type == kDeviceTypeCuda ? "cuda:" + std::to_string(t.device_index) : "cpu";
}

Status CheckTensor(const char* which, const TensorArgs& t, size_t* count) {
  if (t.data == nullptr) {
    int64_t elements = 1;  // a 0-d tensor (no dimensions) is one element
    for (int64_t d : t.shape) elements *= d;
    if (elements != 0) return Invalid(std::string(which) + " tensor has no data pointer");
  }
  if (!IsValidDType(t.dtype))
    return Invalid(std::string(which) + " tensor has unknown dtype " + std::to_string(t.dtype));
  if (t.device_type == kDeviceTypeCuda) {
    if (t.device_index < 0)
      return Invalid(std::string(which) + " tensor has device index " + std::to_string(t.device_index));
    Status usable = CheckCudaDevice(t.device_index);
    if (!usable.ok())
      return Status(usable.code(), std::string(which) + " tensor is on cuda:" +
                                       std::to_string(t.device_index) + ": " + usable.message());
  } else if (t.device_type != kDeviceTypeCpu) {
    return Invalid(std::string(which) + " tensor has unknown device type " +
                   std::to_string(t.device_type));
  }
  int64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return Invalid(std::string(which) + " tensor has a negative dimension");
    if (d != 0 && elements > (int64_t{1} << 56) / d)
      return Invalid(std::string(which) + " tensor is too large");
    elements *= d;
  }
  *count = static_cast<size_t>(elements);
  return Status::Ok();
}

// The compression settings of an allreduce (docs/compression.md), into `spec`.
Status CheckCompression(const CollectiveArgs& args, const std::function<Status(const std::string&)>& invalid,
                        const std::string& label, wire::TensorSpec* spec) {
  const auto& c = args.compression;
  if (c.kind == 0) return Status::Ok();
  if (c.kind < 0 || c.kind > 4) return invalid("unknown compression " + std::to_string(c.kind));
  if (args.kind != wire::COLLECTIVE_ALLREDUCE) return invalid("compression applies to allreduce only");
  if (args.input.device_type != kDeviceTypeCpu)
    return Status(Code::kUnsupported, label + ": compression of device tensors is not supported "
                                              "yet; reduce them uncompressed");
  if (args.input.dtype != static_cast<int32_t>(DType::kFloat32))
    return invalid(std::string("compression needs a float32 tensor, not ") + DTypeName(args.input.dtype));
  if (args.reduce_op != static_cast<int32_t>(ReduceOp::kSum) &&
      args.reduce_op != static_cast<int32_t>(ReduceOp::kAverage))
    return invalid("compression applies to sum and average only");
  const bool topk = c.kind == 3 || (c.kind == 4 && c.adaptive_compressor == 3);
  if (topk && !(c.ratio > 0.0 && c.ratio <= 1.0))
    return invalid("the top-k ratio must be in (0, 1], not " + FormatNumber(c.ratio));
  if (c.kind == 4) {
    if (c.adaptive_compressor < 1 || c.adaptive_compressor > 3)
      return invalid("adaptive compression needs fp16, bf16 or top-k as its compressor, not " +
                     std::to_string(c.adaptive_compressor));
    if (c.adaptive_interval < 1)
      return invalid("the adaptive interval must be at least 1, not " + std::to_string(c.adaptive_interval));
    if (c.adaptive_min_bytes < 0)
      return invalid("the adaptive minimum size is negative: " + std::to_string(c.adaptive_min_bytes));
    if (!(c.adaptive_max_change >= 0.0))
      return invalid("the adaptive maximum change must be at least 0, not " + FormatNumber(c.adaptive_max_change));
  }
  wire::Compression* out = spec->mutable_compression();
  out->set_kind(c.kind);
  if (topk) out->set_ratio(c.ratio);
  if (c.kind == 4) {
    out->set_adaptive_compressor(c.adaptive_compressor);
    out->set_adaptive_interval(c.adaptive_interval);
    out->set_adaptive_min_bytes(c.adaptive_min_bytes);
    out->set_adaptive_max_change(c.adaptive_max_change);
  }
  return Status::Ok();
}

}  // namespace

Status CheckSubmission(const CollectiveArgs& args, int32_t self, const std::vector<int32_t>& members,
                       Request::Operation* op) {
  const std::string label = std::string(wire::KindName(args.kind)) +
                            (args.name.empty() ? "" : " '" + args.name + "'");
  auto invalid = [&](const std::string& why) { return Invalid(label + ": " + why); };
  auto tensor = [&](const char* which, const TensorArgs& t, size_t* count) {
    Status status = CheckTensor(which, t, count);
    return status.ok() ? status : Status(status.code(), label + ": " + status.message());
  };
  if (args.name.size() > 1024) return invalid("name longer than 1024 bytes");
  op->spec.set_kind(args.kind);
  if (args.kind == wire::COLLECTIVE_BARRIER) return Status::Ok();

  TUTTI_RETURN_IF_ERROR(tensor("input", args.input, &op->count));
  const auto dtype = static_cast<DType>(args.input.dtype);
  const bool reduces =
      args.kind == wire::COLLECTIVE_ALLREDUCE || args.kind == wire::COLLECTIVE_REDUCESCATTER;
  if (reduces) {
    if (!IsValidReduceOp(args.reduce_op))
      return invalid("unknown reduce op " + std::to_string(args.reduce_op));
    // bool is logic (sum and max "or", min and product "and"): a mean or a scaled truth value
    // has no meaning, and Horovod refuses them too. Integers scale as Horovod does (kernels).
    if (dtype == DType::kBool && args.reduce_op == static_cast<int32_t>(ReduceOp::kAverage))
      return invalid("average is not defined for bool tensors; use sum (logical or) or min "
                     "(logical and)");
    if (dtype == DType::kBool && (args.prescale != 1.0 || args.postscale != 1.0))
      return invalid("prescale and postscale factors other than 1 do not apply to bool tensors");
    // NCCL reduces no 16-bit integers. Refused here, on every path, rather than reduced
    // differently depending on which path tuttid picks for the set.
    if (dtype == DType::kInt16 && args.input.device_type == kDeviceTypeCuda)
      return Status(Code::kUnsupported,
                    label + ": int16 reductions of device tensors are not supported (NCCL has no "
                            "16-bit integer type); reduce a host copy, or the tensor as int32");
    op->spec.set_reduce_op(args.reduce_op);
    op->spec.set_prescale(args.prescale);
    op->spec.set_postscale(args.postscale);
  }
  op->spec.set_priority(args.priority);
  TUTTI_RETURN_IF_ERROR(CheckCompression(args, invalid, label, &op->spec));
  const bool p2p = args.kind == wire::POINT_TO_POINT_SEND || args.kind == wire::POINT_TO_POINT_RECV;
  if (p2p) {
    const char* role = args.kind == wire::POINT_TO_POINT_SEND ? "destination" : "source";
    if (!std::binary_search(members.begin(), members.end(), args.root))
      return invalid(std::string(role) + " rank " + std::to_string(args.root) +
                     " is not a member of process set " + std::to_string(args.set_id));
    if (args.root == self) return invalid(std::string(role) + " is this rank itself");
    if (args.tag < 0) return invalid("negative tag " + std::to_string(args.tag));
    op->output = args.input.data;
  }
  const bool rows = args.kind != wire::COLLECTIVE_ALLREDUCE && args.kind != wire::COLLECTIVE_BROADCAST && !p2p;
  if (rows && args.input.shape.empty())
    return invalid("the input needs at least one dimension (its rows)");
  switch (args.kind) {
    case wire::COLLECTIVE_ALLREDUCE: {
      size_t out_count = 0;
      TUTTI_RETURN_IF_ERROR(tensor("output", args.output, &out_count));
      if (args.input.dtype != args.output.dtype) return invalid("input and output dtypes differ");
      if (DeviceName(args.input) != DeviceName(args.output))
        return invalid("input is on " + DeviceName(args.input) + ", output on " +
                       DeviceName(args.output) + "; both must be on one device");
      if (op->count != out_count)
        return invalid("input has " + std::to_string(op->count) + " elements, output " +
                       std::to_string(out_count));
      op->output = args.output.data;
      break;
    }
    case wire::COLLECTIVE_BROADCAST:
      if (!std::binary_search(members.begin(), members.end(), args.root))
        return invalid("root rank " + std::to_string(args.root) +
                       " is not a member of process set " + std::to_string(args.set_id));
      op->spec.set_root(args.root);
      op->output = args.input.data;
      break;
    case wire::COLLECTIVE_ALLTOALL: {
      const int64_t n = static_cast<int64_t>(members.size()), total = args.input.shape[0];
      std::vector<int64_t> splits;
      if (!args.splits) {
        if (total % n != 0)
          return invalid(std::to_string(total) + " rows do not divide among " + std::to_string(n) +
                         " ranks; give splits");
        splits.assign(n, total / n);
      } else {
        splits = *args.splits;
        if (static_cast<int64_t>(splits.size()) != n)
          return invalid(std::to_string(splits.size()) + " splits for a set of " +
                         std::to_string(n) + " ranks");
        int64_t sum = 0;
        for (int64_t split : splits) {
          if (split < 0) return invalid("negative split " + std::to_string(split));
          sum += split;
        }
        if (sum != total)
          return invalid("splits add up to " + std::to_string(sum) + " rows, the input has " +
                         std::to_string(total));
      }
      op->spec.mutable_splits()->Add(splits.begin(), splits.end());
      break;
    }
    default:
      break;
  }
  op->spec.set_dtype(args.input.dtype);
  op->spec.mutable_shape()->Add(args.input.shape.begin(), args.input.shape.end());
  op->spec.set_device_type(args.input.device_type);
  op->spec.set_device_index(args.input.device_index);
  op->input = args.input.data;
  return Status::Ok();
}

Status CheckGroupDevices(const CollectiveArgs& args, const std::vector<TensorArgs>& inputs) {
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (DeviceName(inputs[i]) == DeviceName(inputs[0])) continue;
    return Invalid("grouped " + std::string(wire::KindName(args.kind)) +
                   (args.name.empty() ? "" : " '" + args.name + "'") +
                   ": all tensors of a group must be on one device: tensor 0 is on " +
                   DeviceName(inputs[0]) + ", tensor " + std::to_string(i) + " on " +
                   DeviceName(inputs[i]));
  }
  return Status::Ok();
}

}  // namespace tutti::client
