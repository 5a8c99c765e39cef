// The one conversion between tutti's Status and the wire's Error, in both directions. Status codes
// are tutti.h's statuses on the wire too (common/status.h), so a failure crosses tuttid and the C
// ABI with the same code and words. Everything that puts a status in a frame or reads one out of
// a frame goes through here.
#pragma once

#include "common/status.h"
#include "tutti.pb.h"

namespace tutti::wire {

// The status an Error carries; an absent or zero-coded Error is ok.
inline Status ToStatus(const Error& error) {
  if (error.code() == 0) return Status::Ok();
  return Status(static_cast<Code>(error.code()), error.message());
}

inline void ToWire(const Status& status, Error* error) {
  error->set_code(static_cast<int32_t>(status.code()));
  error->set_message(status.message());
}

// A frame part (Response, SetReply, ...) whose `error` field is set to a failure.
template <typename Message>
bool Failed(const Message& message) {
  return message.has_error() && message.error().code() != 0;
}

// The status of a frame part with an optional `error` field.
template <typename Message>
Status StatusOf(const Message& message) {
  return message.has_error() ? ToStatus(message.error()) : Status::Ok();
}

}  // namespace tutti::wire
