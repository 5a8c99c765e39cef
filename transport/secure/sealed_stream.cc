#include "transport/secure/sealed_stream.h"

#include <algorithm>
#include <cstring>

namespace tutti::transport {

Status SealedStream::Write(const void* data, size_t len, Deadline deadline) {
  if (!failed_.ok()) return failed_;
  const char* bytes = static_cast<const char*>(data);
  while (len > 0) {
    const size_t n = std::min(len, kMaxRecordPayload);
    const size_t record = cipher_->Seal(bytes, n, record_.data());
    TUTTI_RETURN_IF_ERROR(inner_->Write(record_.data(), record, deadline));
    bytes += n;
    len -= n;
  }
  return Status::Ok();
}

Status SealedStream::Read(void* data, size_t len, Deadline deadline) {
  if (!failed_.ok()) return failed_;
  char* bytes = static_cast<char*>(data);
  while (len > 0) {
    if (plain_left_ == 0) {
      TUTTI_RETURN_IF_ERROR(inner_->Read(record_.data(), kRecordHeaderBytes, deadline));
      const size_t payload = RecordCipher::PayloadLength(record_.data());
      if (payload > 0)
        TUTTI_RETURN_IF_ERROR(inner_->Read(record_.data() + kRecordHeaderBytes,
                                           payload + kRecordTagBytes, deadline));
      if (payload == 0 || !cipher_->Open(record_.data(), payload))
        return failed_ = Status(Code::kAuthFailed,
                                "data-plane integrity: " + peer_ + ": point-to-point record " +
                                    std::to_string(cipher_->sequence()) +
                                    " failed authentication: altered, replayed, reordered or "
                                    "dropped on the way");
      plain_at_ = kRecordHeaderBytes;
      plain_left_ = payload;
    }
    const size_t n = std::min(len, plain_left_);
    std::memcpy(bytes, record_.data() + plain_at_, n);
    plain_at_ += n;
    plain_left_ -= n;
    bytes += n;
    len -= n;
  }
  return Status::Ok();
}

}  // namespace tutti::transport
