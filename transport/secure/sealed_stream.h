// A point-to-point stream whose bytes travel in sealed records (transport/secure/record_cipher.h),
// over another stream (TCP's). One direction: the writer only seals, the reader only opens. A
// record that fails to open fails the Read with kAuthFailed, and every later one.
// Used by one thread; Abort() from any, as the stream it wraps.
#pragma once

#include <memory>
#include <vector>

#include "transport/secure/record_cipher.h"
#include "transport/transport.h"

namespace tutti::transport {

class SealedStream : public Stream {
 public:
  // `cipher` seals if this side writes, opens if it reads.
  SealedStream(std::unique_ptr<Stream> inner, std::unique_ptr<RecordCipher> cipher, std::string peer)
      : inner_(std::move(inner)), cipher_(std::move(cipher)), peer_(std::move(peer)), record_(kMaxRecordBytes) {}

  Status Write(const void* data, size_t len, Deadline deadline) override;
  Status Read(void* data, size_t len, Deadline deadline) override;
  void Abort(const Status& status) override { inner_->Abort(status); }

 private:
  std::unique_ptr<Stream> inner_;
  std::unique_ptr<RecordCipher> cipher_;
  std::string peer_;  // "rank 3", for messages
  Status failed_;
  std::vector<char> record_;
  size_t plain_at_ = 0, plain_left_ = 0;  // opened plaintext not yet read, inside record_
};

}  // namespace tutti::transport
