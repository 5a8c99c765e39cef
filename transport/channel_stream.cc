#include "transport/channel_stream.h"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tutti::transport {

Status ChannelStream::Write(const void* data, size_t len, Deadline deadline) {
  return Transfer(const_cast<char*>(static_cast<const char*>(data)), len, true, deadline);
}

Status ChannelStream::Read(void* data, size_t len, Deadline deadline) {
  return Transfer(static_cast<char*>(data), len, false, deadline);
}

Status ChannelStream::Checked(Status status) {
  Status aborted = abort_.status();
  return aborted.ok() ? status : aborted;
}

Status ChannelStream::Transfer(char* data, size_t len, bool send, Deadline deadline) {
  std::vector<pollfd> fds;
  for (size_t done = 0; done < len;) {
    const size_t before = done;
    Status status = send ? channel_->TrySend(data + done, len - done, &done)
                         : channel_->TryRecv(data + done, len - done, &done);
    // A record that failed authentication (a sealed channel) is not a lost peer: say so.
    if (status.code() == Code::kAuthFailed)
      return Checked(Status(Code::kAuthFailed, "data-plane integrity: " + peer_ + ": " + status.message()));
    if (!status.ok())
      return Checked(Status(Code::kPeerLost, "peer lost: " + peer_ + ": " + status.message()));
    if (done > before) continue;
    if (!abort_.status().ok()) return abort_.status();
    if (Clock::now() >= deadline)
      return Status(Code::kTimeout, "no progress from " + peer_ + " before the deadline");
    fds.assign({{abort_.fd(), POLLIN, 0}});
    if (!channel_->PrepareWait(send, !send, 1, &fds)) continue;
    const int ready = poll(fds.data(), fds.size(), PollTimeoutMs(deadline));
    channel_->FinishWait(&fds[1]);
    if (ready < 0 && errno != EINTR) return Checked(Status(Code::kInternal, std::strerror(errno)));
  }
  return Checked(Status::Ok());
}

}  // namespace tutti::transport
