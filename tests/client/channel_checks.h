// The checks every backend's channel (transport/channel.h) passes, driven through its
// non-blocking interface alone, as a context drives it: bytes both ways at once arrive intact,
// sleeping in poll only on what PrepareWait asks for, and a receive reports what a closed peer
// left. tests/client/channel_test.cc runs them over TCP and shared memory, tests/rdma over
// ibverbs (where an RDMA device exists).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "client/client_test_support.h"
#include "transport/channel.h"
#include "transport/fd_io.h"

namespace tutti::testing {

using transport::Channel;
using transport::Clock;
using transport::Deadline;
using transport::PollTimeoutMs;

// Two connected ends of a Unix stream socket pair, standing in for a TCP connection.
inline void SocketPair(transport::UniqueFd* a, transport::UniqueFd* b) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0) << std::strerror(errno);
  *a = transport::UniqueFd(fds[0]);
  *b = transport::UniqueFd(fds[1]);
}

inline std::vector<char> Pattern(size_t bytes, unsigned seed) {
  std::vector<char> data(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : data) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return data;
}

// One direction of a transfer through a channel: what is left to send or to receive.
struct Flow {
  const char* send = nullptr;
  char* recv = nullptr;
  size_t len = 0, sent = 0, received = 0;
};

// Drives both channels from this thread until `ab` went from a to b and `ba` from b to a, or
// the deadline; sleeps in poll only on what PrepareWait asks for. Returns the first error.
inline Status Exchange(Channel& a, Channel& b, Flow& ab, Flow& ba, Deadline deadline) {
  a.BeginSend();
  b.BeginRecv();
  b.BeginSend();
  a.BeginRecv();
  while (ab.received < ab.len || ba.received < ba.len) {
    const size_t before = ab.sent + ab.received + ba.sent + ba.received;
    auto step = [](Channel& from, Channel& to, Flow& flow) -> Status {
      if (flow.sent < flow.len)
        TUTTI_RETURN_IF_ERROR(from.TrySend(flow.send + flow.sent, flow.len - flow.sent, &flow.sent));
      if (flow.received < flow.len)
        TUTTI_RETURN_IF_ERROR(
            to.TryRecv(flow.recv + flow.received, flow.len - flow.received, &flow.received));
      return Status::Ok();
    };
    TUTTI_RETURN_IF_ERROR(step(a, b, ab));
    TUTTI_RETURN_IF_ERROR(step(b, a, ba));
    if (ab.sent + ab.received + ba.sent + ba.received != before) continue;
    if (Clock::now() >= deadline) return Status(Code::kTimeout, "no progress before the deadline");
    std::vector<pollfd> fds;
    const bool a_sleeps = a.PrepareWait(ab.sent < ab.len, ba.received < ba.len, 1, &fds);
    const size_t a_fds = fds.size();
    const bool b_sleeps = b.PrepareWait(ba.sent < ba.len, ab.received < ab.len, 1, &fds);
    // Either could move meanwhile: then do not sleep, but every prepared wait must finish.
    if (a_sleeps && b_sleeps && poll(fds.data(), fds.size(), PollTimeoutMs(deadline)) < 0 &&
        errno != EINTR)
      return Status(Code::kInternal, std::string("poll: ") + std::strerror(errno));
    if (a_sleeps) a.FinishWait(fds.data());
    if (b_sleeps) b.FinishWait(fds.data() + a_fds);
  }
  return Status::Ok();
}

// Sends 3 MiB one way and 5 MiB + 3 bytes the other, at once, and checks every byte.
inline void ExpectBothWaysIntact(Channel& a, Channel& b) {
  const std::vector<char> to_b = Pattern(3 << 20, 1), to_a = Pattern((5 << 20) + 3, 2);
  std::vector<char> got_b(to_b.size()), got_a(to_a.size());
  Flow ab{to_b.data(), got_b.data(), to_b.size()}, ba{to_a.data(), got_a.data(), to_a.size()};
  ASSERT_TRUE(IsOk(Exchange(a, b, ab, ba, In(kPatience))));
  EXPECT_EQ(ab.sent, to_b.size());
  EXPECT_EQ(ba.sent, to_a.size());
  EXPECT_TRUE(got_b == to_b) << "bytes from a to b differ";
  EXPECT_TRUE(got_a == to_a) << "bytes from b to a differ";
}

// Waits (bounded) until `channel` reports something other than "nothing yet" for a receive.
inline Status RecvUntilNotEmpty(Channel& channel, Deadline deadline) {
  char byte;
  while (true) {
    size_t moved = 0;
    Status status = channel.TryRecv(&byte, 1, &moved);
    if (!status.ok() || moved > 0) return status;
    if (Clock::now() >= deadline) return Status(Code::kTimeout, "still nothing");
    std::vector<pollfd> fds;
    if (channel.PrepareWait(false, true, 1, &fds)) {
      poll(fds.data(), fds.size(), PollTimeoutMs(deadline));
      channel.FinishWait(fds.data());
    }
  }
}

}  // namespace tutti::testing
