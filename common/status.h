// Status: an error code plus a message, passed by value between tutti's internal layers.
// Codes are the numeric values of tutti.h's statuses (capi/ checks that they agree), so a status
// crosses the wire and the C ABI unchanged.
#pragma once

#include <string>
#include <utility>

namespace tutti {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = -1,
  kUnknownSet = -2,
  kNotAMember = -3,
  kDuplicateName = -4,
  kMismatch = -5,
  kPeerLost = -6,
  kCoordinatorLost = -7,
  kTimeout = -8,
  kAborted = -9,
  kStalled = -10,
  kVersionMismatch = -11,
  kAuthFailed = -12,
  kShutDown = -13,
  kInternal = -14,
  kSetRemoved = -15,
  kUnsupported = -16,
  kEvicted = -17,
  kLimitExceeded = -18,
  kDeviceUnavailable = -19,
  kReformed = -20,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Returns early from the calling function when `expr` yields an error status.
#define TUTTI_RETURN_IF_ERROR(expr)      \
  do {                                   \
    ::tutti::Status tutti_status_ = (expr); \
    if (!tutti_status_.ok()) return tutti_status_; \
  } while (0)

}  // namespace tutti
