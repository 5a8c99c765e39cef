// The TCP and shared-memory channels (transport/tcp/tcp_channel.h, transport/shm/shm_channel.h)
// on their own, without devices or handshakes: a TcpChannel on each end of a socketpair, and a
// ShmChannel created on one side and adopted on the other with the creator's descriptors and a
// Unix socketpair standing in for the handshake socket. A few MiB go both ways at once through
// TrySend/TryRecv, sleeping in poll on what PrepareWait asks for, and arrive intact; a closed
// peer ends the other side with kPeerLost and its real message; and Adopt refuses descriptors
// that do not make a segment of this version.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "client/client_test_support.h"
#include "transport/shm/shm_channel.h"
#include "transport/tcp/tcp_channel.h"

namespace tutti::transport {
namespace {

using namespace tutti::testing;

std::vector<char> Pattern(size_t bytes, unsigned seed) {
  std::vector<char> data(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : data) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return data;
}

void SocketPair(UniqueFd* a, UniqueFd* b) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0) << std::strerror(errno);
  *a = UniqueFd(fds[0]);
  *b = UniqueFd(fds[1]);
}

// One direction of a transfer through a channel: what is left to send or to receive.
struct Flow {
  const char* send = nullptr;
  char* recv = nullptr;
  size_t len = 0, sent = 0, received = 0;
};

// Drives both channels from this thread until `ab` went from a to b and `ba` from b to a, or
// the deadline; sleeps in poll only on what PrepareWait asks for. Returns the first error.
Status Exchange(Channel& a, Channel& b, Flow& ab, Flow& ba, Deadline deadline) {
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
void ExpectBothWaysIntact(Channel& a, Channel& b) {
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
Status RecvUntilNotEmpty(Channel& channel, Deadline deadline) {
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

std::unique_ptr<TcpChannel> TcpPeer(UniqueFd fd) { return std::make_unique<TcpChannel>(std::move(fd)); }

// A shared-memory pair: `*a` created the segment, `*b` adopted it.
void ShmPair(std::unique_ptr<ShmChannel>* a, std::unique_ptr<ShmChannel>* b) {
  std::vector<int> to_pass;
  ASSERT_TRUE(IsOk(ShmChannel::Create(kShmFifoBytes, a, &to_pass)));
  ASSERT_EQ(to_pass.size(), 3u);
  // What SCM_RIGHTS would deliver: the receiver's own descriptors for the same files.
  std::vector<UniqueFd> passed;
  for (int fd : to_pass) passed.emplace_back(dup(fd));
  UniqueFd mine, theirs;
  SocketPair(&mine, &theirs);
  ASSERT_TRUE(IsOk(ShmChannel::Adopt(std::move(theirs), std::move(passed), b)));
  (*a)->Connected(std::move(mine));
}

TEST(TcpChannel, MovesMebibytesBothWaysIntact) {
  UniqueFd x, y;
  SocketPair(&x, &y);
  auto a = TcpPeer(std::move(x)), b = TcpPeer(std::move(y));
  EXPECT_EQ(a->link(), Link::kTcp);
  EXPECT_FALSE(a->spins());
  EXPECT_FALSE(a->has_windows());
  ExpectBothWaysIntact(*a, *b);
}

TEST(TcpChannel, ClosedPeerIsPeerLostConnectionClosed) {
  UniqueFd x, y;
  SocketPair(&x, &y);
  auto a = TcpPeer(std::move(x)), b = TcpPeer(std::move(y));
  b.reset();
  EXPECT_TRUE(IsStatus(RecvUntilNotEmpty(*a, In(kPatience)), Code::kPeerLost, "connection closed"));
  size_t moved = 0;
  const char byte = 1;
  EXPECT_TRUE(IsStatus(a->TrySend(&byte, 1, &moved), Code::kPeerLost, "send: Broken pipe"));
  EXPECT_EQ(moved, 0u);
}

TEST(TcpChannel, BytesSentBeforeTheCloseStillArrive) {
  UniqueFd x, y;
  SocketPair(&x, &y);
  auto a = TcpPeer(std::move(x)), b = TcpPeer(std::move(y));
  const char sent[] = "last words";
  size_t moved = 0;
  ASSERT_TRUE(IsOk(b->TrySend(sent, sizeof sent, &moved)));
  ASSERT_EQ(moved, sizeof sent);
  b.reset();
  char got[sizeof sent] = {};
  moved = 0;
  ASSERT_TRUE(IsOk(a->TryRecv(got, sizeof got, &moved)));
  EXPECT_EQ(moved, sizeof sent);
  EXPECT_STREQ(got, sent);
  EXPECT_TRUE(IsStatus(RecvUntilNotEmpty(*a, In(kPatience)), Code::kPeerLost, "connection closed"));
}

TEST(TcpChannel, WaitsOnItsSocketForWhatItNeeds) {
  UniqueFd x, y;
  SocketPair(&x, &y);
  const int fd = x.get();
  TcpChannel a(std::move(x));
  std::vector<pollfd> fds;
  EXPECT_TRUE(a.PrepareWait(true, true, 1, &fds));
  ASSERT_EQ(fds.size(), 1u);
  EXPECT_EQ(fds[0].fd, fd);
  EXPECT_EQ(fds[0].events, POLLIN | POLLOUT);
}

TEST(ShmChannel, MovesMebibytesBothWaysIntactThroughFifosSmallerThanTheMessages) {
  std::unique_ptr<ShmChannel> a, b;
  ShmPair(&a, &b);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->link(), Link::kShm);
  EXPECT_TRUE(a->spins());
  EXPECT_TRUE(b->has_windows());
  ExpectBothWaysIntact(*a, *b);
}

TEST(ShmChannel, WindowsExposeTheBytesInFlight) {
  std::unique_ptr<ShmChannel> a, b;
  ShmPair(&a, &b);
  ASSERT_TRUE(a && b);
  a->BeginSend();
  b->BeginRecv();
  char* out;
  size_t room;
  const size_t contiguous = a->WriteWindow(&out, &room);
  EXPECT_EQ(room, kShmFifoBytes);
  ASSERT_GE(contiguous, 5u);
  std::memcpy(out, "hello", 5);
  const char* in;
  size_t ready;
  b->ReadWindow(&in, &ready);
  EXPECT_EQ(ready, 0u);  // nothing produced yet
  a->Produce(5);
  ASSERT_EQ(b->ReadWindow(&in, &ready), 5u);
  EXPECT_EQ(ready, 5u);
  EXPECT_EQ(std::string(in, 5), "hello");
  b->Consume(5);
  b->ReadWindow(&in, &ready);
  EXPECT_EQ(ready, 0u);
  a->WriteWindow(&out, &room);
  EXPECT_EQ(room, kShmFifoBytes);
}

TEST(ShmChannel, ClosedPeerIsPeerLostConnectionClosed) {
  std::unique_ptr<ShmChannel> a, b;
  ShmPair(&a, &b);
  ASSERT_TRUE(a && b);
  b.reset();
  EXPECT_TRUE(IsStatus(RecvUntilNotEmpty(*a, In(kPatience)), Code::kPeerLost, "connection closed"));
  EXPECT_TRUE(a->peer_gone());
  size_t moved = 0;
  const char byte = 1;
  EXPECT_TRUE(IsStatus(a->TrySend(&byte, 1, &moved), Code::kPeerLost, "connection closed"));
  EXPECT_EQ(moved, 0u);
}

TEST(ShmChannel, BytesSentBeforeTheCloseStillArrive) {
  std::unique_ptr<ShmChannel> a, b;
  ShmPair(&a, &b);
  ASSERT_TRUE(a && b);
  const std::vector<char> sent = Pattern(1 << 20, 3);
  size_t moved = 0;
  b->BeginSend();
  ASSERT_TRUE(IsOk(b->TrySend(sent.data(), sent.size(), &moved)));
  ASSERT_EQ(moved, sent.size());  // fits in the FIFO
  b.reset();
  // The creator learns of the close while waiting; what is in the FIFO still comes out.
  std::vector<pollfd> fds;
  EXPECT_FALSE(a->PrepareWait(false, true, 1, &fds));  // bytes are ready: no sleep
  std::vector<char> got(sent.size());
  a->BeginRecv();
  moved = 0;
  ASSERT_TRUE(IsOk(a->TryRecv(got.data(), got.size(), &moved)));
  EXPECT_EQ(moved, sent.size());
  EXPECT_TRUE(got == sent);
  EXPECT_TRUE(IsStatus(RecvUntilNotEmpty(*a, In(kPatience)), Code::kPeerLost, "connection closed"));
}

TEST(ShmChannel, AdoptRefusesAHelloWithoutThreeDescriptors) {
  std::unique_ptr<ShmChannel> a, b;
  std::vector<int> to_pass;
  ASSERT_TRUE(IsOk(ShmChannel::Create(kShmFifoBytes, &a, &to_pass)));
  std::vector<UniqueFd> passed;
  passed.emplace_back(dup(to_pass[0]));
  passed.emplace_back(dup(to_pass[1]));
  UniqueFd mine, theirs;
  SocketPair(&mine, &theirs);
  EXPECT_TRUE(IsStatus(ShmChannel::Adopt(std::move(theirs), std::move(passed), &b),
                       Code::kInternal, "shared memory: the hello carried 2 descriptors, not 3"));
  EXPECT_EQ(b, nullptr);
}

TEST(ShmChannel, AdoptRefusesFifosOfAnotherSize) {
  std::unique_ptr<ShmChannel> a, b;
  std::vector<int> to_pass;
  ASSERT_TRUE(IsOk(ShmChannel::Create(1 << 20, &a, &to_pass)));
  std::vector<UniqueFd> passed;
  for (int fd : to_pass) passed.emplace_back(dup(fd));
  UniqueFd mine, theirs;
  SocketPair(&mine, &theirs);
  EXPECT_TRUE(IsStatus(ShmChannel::Adopt(std::move(theirs), std::move(passed), &b),
                       Code::kInternal,
                       "shared memory: the peer's FIFOs hold 1048576 bytes, this rank's 4194304 "
                       "(mixed tutti versions?)"));
}

}  // namespace
}  // namespace tutti::transport
