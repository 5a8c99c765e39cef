// The TCP and shared-memory channels (transport/tcp/tcp_channel.h, transport/shm/shm_channel.h)
// on their own, without devices or handshakes, through the checks every backend's channel passes
// (client/channel_checks.h; tests/rdma runs them over ibverbs): a TcpChannel on each end of a
// socketpair, and a ShmChannel created on one side and adopted on the other with the creator's
// descriptors and a Unix socketpair standing in for the handshake socket. A few MiB go both ways at once through
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

#include "client/channel_checks.h"
#include "client/client_test_support.h"
#include "transport/shm/shm_channel.h"
#include "transport/tcp/tcp_channel.h"

namespace tutti::transport {
namespace {

using namespace tutti::testing;

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
