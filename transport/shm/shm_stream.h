// One direction of a point-to-point stream between ranks of one host, over a shared-memory
// channel: the rank that opened it writes, the one that accepted it reads. Used by one thread;
// Abort() from any.
#pragma once

#include <string>

#include "transport/abort_latch.h"
#include "transport/shm/shm_channel.h"

namespace tutti::transport {

class ShmStream : public Stream {
 public:
  // `peer` names the other side in messages ("rank 3").
  ShmStream(std::unique_ptr<ShmChannel> channel, std::string peer)
      : channel_(std::move(channel)), peer_(std::move(peer)) {}

  Status Write(const void* data, size_t len, Deadline deadline) override;
  Status Read(void* data, size_t len, Deadline deadline) override;
  void Abort(const Status& status) override { abort_.Set(status); }

 private:
  Status Transfer(char* data, size_t len, bool send, Deadline deadline);
  // The abort status once Abort() was called, else `status`.
  Status Checked(Status status);

  std::unique_ptr<ShmChannel> channel_;
  AbortLatch abort_;
  std::string peer_;
};

}  // namespace tutti::transport
