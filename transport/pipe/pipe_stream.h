// One direction of a point-to-point stream over a message pipe (MPI): the rank that opened it
// writes, the one that accepted it reads. Used by one thread; Abort() from any.
#pragma once

#include <string>

#include "transport/abort_latch.h"
#include "transport/pipe/pipe_channel.h"

namespace tutti::transport {

class PipeStream : public Stream {
 public:
  // `peer` names the other side in messages ("rank 3").
  PipeStream(std::unique_ptr<PipeChannel> channel, std::string peer)
      : channel_(std::move(channel)), peer_(std::move(peer)) {}

  Status Write(const void* data, size_t len, Deadline deadline) override;
  Status Read(void* data, size_t len, Deadline deadline) override;
  void Abort(const Status& status) override { abort_.Set(status); }

 private:
  // Spins and naps as the channel asks, looking at the abort and the deadline every time, since
  // the channel's busy window never enters poll.
  Status Transfer(char* data, size_t len, bool send, Deadline deadline);
  // The abort status once Abort() was called, else `status`.
  Status Checked(Status status);

  std::unique_ptr<PipeChannel> channel_;
  AbortLatch abort_;
  std::string peer_;
};

}  // namespace tutti::transport
