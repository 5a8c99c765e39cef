// One direction of a point-to-point stream over a backend's Channel (shared memory, an MPI message
// pipe): the rank that opened it writes, the one that accepted it reads. TCP's streams use their
// socket directly (tcp/tcp_stream.h). Used by one thread; Abort() from any.
#pragma once

#include <memory>
#include <string>

#include "transport/abort_latch.h"
#include "transport/channel.h"

namespace tutti::transport {

class ChannelStream : public Stream {
 public:
  // `peer` names the other side in messages ("rank 3").
  ChannelStream(std::unique_ptr<Channel> channel, std::string peer)
      : channel_(std::move(channel)), peer_(std::move(peer)) {}

  Status Write(const void* data, size_t len, Deadline deadline) override;
  Status Read(void* data, size_t len, Deadline deadline) override;
  void Abort(const Status& status) override { abort_.Set(status); }

 private:
  // Moves bytes while the channel can, and sleeps in poll when it asks to. The abort and the
  // deadline are looked at on every turn without progress, since a spinning channel (MPI) may
  // never ask to sleep.
  Status Transfer(char* data, size_t len, bool send, Deadline deadline);
  // The abort status once Abort() was called, else `status`.
  Status Checked(Status status);

  std::unique_ptr<Channel> channel_;
  AbortLatch abort_;
  std::string peer_;
};

}  // namespace tutti::transport
