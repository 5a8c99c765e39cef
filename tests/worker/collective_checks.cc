// The checks of collective_checks.h.
#include "worker/collective_checks.h"

namespace worker {

// Waits for `request` and returns its status; `what` names it in failure lines.
tutti_status_t Finish(tutti_request_t request, const std::string& what) {
  tutti_status_t status = tutti_request_wait(request, -1);
  if (status != TUTTI_OK) Say("fail %s: %d %s", what.c_str(), status, tutti_last_error());
  return status;
}

// The result tensor a request owns, as values of `d`.
std::vector<double> Output(tutti_request_t request, const DTypeInfo& d, std::vector<int64_t>* shape) {
  tutti_tensor_t out = TUTTI_TENSOR_INIT;
  Check("output", tutti_request_output(request, &out));
  shape->assign(out.shape, out.shape + out.ndim);
  int64_t count = 1;
  for (int64_t dim : *shape) count *= dim;
  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) values[i] = d.load(out.data, i);
  return values;
}

// A value every dtype holds exactly: small integers, some negative (none for uint8); for bool,
// bytes that are not all 0 or 1 (BoolContribution).
double Value(const DTypeInfo& d, int32_t rank, int64_t i) {
  if (d.dtype == TUTTI_DTYPE_BOOL) return BoolContribution(rank, i);
  double v = static_cast<double>((rank * 5 + i * 3) % 9) - (d.dtype == TUTTI_DTYPE_UINT8 ? 0 : 4);
  return v;
}

Tensor Filled(const DTypeInfo& d, std::vector<int64_t> shape, int32_t rank) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  Tensor t(d.dtype, count, d.size);
  t.shape = shape;
  t.desc.ndim = static_cast<int32_t>(shape.size());
  t.desc.shape = t.shape.data();
  for (int64_t i = 0; i < count; ++i) d.store(t.bytes.data(), i, Value(d, rank, i));
  return t;
}

bool Expect(const std::string& what, const std::vector<double>& got, const std::vector<double>& want) {
  if (got == want) return true;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  Say("fail %s: %zu values, expected %zu; first difference at %zu", what.c_str(), got.size(),
      want.size(), i);
  return false;
}

// Waits for a request expected to fail and prints "err <label> <status> <message>".
// `request` is read after `submitted` was computed (argument order is unspecified in C++).
void ReportFailure(const char* label, tutti_status_t submitted, tutti_request_t* slot) {
  tutti_request_t request = *slot;
  *slot = nullptr;
  if (submitted != TUTTI_OK) {
    Say("err %s %d %s", label, submitted, tutti_last_error());
    return;
  }
  tutti_status_t status = tutti_request_wait(request, -1);
  Say("err %s %d %s", label, status, tutti_last_error());
  tutti_request_free(request);
}

}  // namespace worker
