// What the collective, join and point-to-point scenarios share: waiting for a request,
// reading its result, the values every rank contributes, and the lines a failed check prints.
#pragma once

#include <tutti/tutti.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/worker_common.h"

namespace worker {

// Waits for `request` and returns its status; `what` names it in failure lines.
tutti_status_t Finish(tutti_request_t request, const std::string& what);

// The result tensor a request owns, as values of `d`.
std::vector<double> Output(tutti_request_t request, const DTypeInfo& d, std::vector<int64_t>* shape);

// A value every dtype holds exactly: small integers, some negative (none for uint8); for bool,
// bytes that are not all 0 or 1 (BoolContribution).
double Value(const DTypeInfo& d, int32_t rank, int64_t i);

// A tensor of `shape` holding Value(d, rank, i) at row-major index i.
Tensor Filled(const DTypeInfo& d, std::vector<int64_t> shape, int32_t rank);

// Whether `got` is `want`; if not, prints a "fail" line with the first difference.
bool Expect(const std::string& what, const std::vector<double>& got, const std::vector<double>& want);

// Waits for a request expected to fail and prints "err <label> <status> <message>".
// `request` is read after `submitted` was computed (argument order is unspecified in C++).
void ReportFailure(const char* label, tutti_status_t submitted, tutti_request_t* slot);

}  // namespace worker
