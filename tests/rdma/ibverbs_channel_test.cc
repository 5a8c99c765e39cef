// The ibverbs backend on a real RDMA device, in one process (docs/transports.md, "ibverbs"): the
// checks every backend's channel passes (client/channel_checks.h) over a queue pair made by the
// backend's own Connect and Adopt through two loopback devices; bytes a closed peer sent still
// arriving before kPeerLost; the ring allreduce over ibverbs contexts against a serial sum; an
// abort and a deadline ending a wait; a point-to-point stream. The adapter's loopback carries the
// pair, so one host with one active port is enough.
//
// Every test skips, reported as skipped, with discovery's reason ("no RDMA device") where this
// process finds no usable port: on the machines this was written on, all of them.
// tests/rdma/device_check.sh runs them where `ibv_devices` lists a device.
#include <gtest/gtest.h>

#include <thread>

#include "client/channel_checks.h"
#include "client/client_test_support.h"
#include "client/exec/ring_allreduce.h"
#include "transport/backend.h"
#include "transport/socket_device.h"

namespace tutti::transport {
namespace {

using namespace tutti::testing;

constexpr int32_t kSet = 3;

class Ibverbs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!FindBackend("ibverbs")->Viable(&why)) GTEST_SKIP() << why;
  }
};

std::unique_ptr<SocketDevice> NewDevice(const std::string& secret, int32_t self) {
  std::unique_ptr<Device> device;
  EXPECT_TRUE(IsOk(CreateDevice("127.0.0.1", &device)));
  device->SetJobSecret(secret, self, DataSecurity::kOff);
  return std::unique_ptr<SocketDevice>(static_cast<SocketDevice*>(device.release()));
}

// Rank 0's and rank 1's channels of one pair, made as contexts make them: rank 0 connects, rank 1
// accepts and adopts, each on its own thread.
struct Pair {
  std::string secret = NewJobSecret();
  std::unique_ptr<SocketDevice> devices[2] = {NewDevice(secret, 0), NewDevice(secret, 1)};
  std::unique_ptr<Channel> channels[2];

  void Connect() {
    const Backend* ibverbs = FindBackend(Link::kIbverbs);
    Status accepted;
    std::thread acceptor([&] {
      Accepted connection;
      accepted = devices[1]->Accept(kSet, 0, In(kPatience), -1, &connection);
      if (accepted.ok())
        accepted = FindBackend(connection.link)->Adopt(devices[1].get(), std::move(connection),
                                                       &channels[1]);
    });
    Status connected = ibverbs->Connect(
        devices[0].get(), Dial{kSet, 0, 1, devices[1]->endpoint(), In(kPatience), -1}, &channels[0]);
    acceptor.join();
    ASSERT_TRUE(IsOk(connected));
    ASSERT_TRUE(IsOk(accepted));
  }
};

// Sends all of `data` through `channel`, sleeping as it asks: bytes count once their write
// completed.
Status SendAll(Channel& channel, const std::vector<char>& data) {
  size_t moved = 0;
  channel.BeginSend();
  while (moved < data.size()) {
    const size_t before = moved;
    TUTTI_RETURN_IF_ERROR(channel.TrySend(data.data() + moved, data.size() - moved, &moved));
    if (moved > before) continue;
    std::vector<pollfd> fds;
    if (channel.PrepareWait(true, false, 1, &fds)) {
      poll(fds.data(), fds.size(), 1000);
      channel.FinishWait(fds.data());
    }
  }
  return Status::Ok();
}

TEST_F(Ibverbs, ChannelsMoveMebibytesBothWaysIntact) {
  Pair pair;
  pair.Connect();
  ASSERT_TRUE(pair.channels[0] && pair.channels[1]);
  EXPECT_EQ(pair.channels[0]->link(), Link::kIbverbs);
  EXPECT_EQ(pair.channels[1]->link(), Link::kIbverbs);
  EXPECT_TRUE(pair.channels[0]->spins());
  ExpectBothWaysIntact(*pair.channels[0], *pair.channels[1]);
  // Again, on the same queue pairs: the credits came back.
  ExpectBothWaysIntact(*pair.channels[1], *pair.channels[0]);
}

TEST_F(Ibverbs, BytesAClosedPeerSentArriveBeforeThePeerIsLost) {
  Pair pair;
  pair.Connect();
  ASSERT_TRUE(pair.channels[0] && pair.channels[1]);
  const std::vector<char> sent = Pattern(1 << 20, 5);
  ASSERT_TRUE(IsOk(SendAll(*pair.channels[1], sent)));
  pair.channels[1].reset();
  std::vector<char> got(sent.size());
  size_t moved = 0;
  pair.channels[0]->BeginRecv();
  while (moved < got.size()) {
    const size_t before = moved;
    ASSERT_TRUE(IsOk(pair.channels[0]->TryRecv(got.data() + moved, got.size() - moved, &moved)));
    if (moved == before) std::this_thread::yield();
  }
  EXPECT_TRUE(got == sent);
  EXPECT_TRUE(IsStatus(RecvUntilNotEmpty(*pair.channels[0], In(kPatience)), Code::kPeerLost,
                       "connection closed"));
  EXPECT_TRUE(pair.channels[0]->peer_gone());
}

std::vector<float> Input(size_t rank, size_t count) {
  std::vector<float> data(count);
  for (size_t j = 0; j < count; ++j) data[j] = static_cast<float>((j * 7 + rank * 13) % 101);
  return data;
}

// RingAllreduce on every rank of a loopback job forced onto ibverbs; exact against a serial sum
// (integer-valued floats), and every pair reports ibverbs, connected.
void ExpectRingAllreduceMatches(size_t n, size_t count) {
  LoopbackJob job(n);
  ASSERT_EQ(job.size(), n);
  std::vector<int32_t> ranks;
  for (size_t r = 0; r < n; ++r) ranks.push_back(static_cast<int32_t>(r));
  const MemberList members(ranks);
  std::vector<float> expected(count, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    const std::vector<float> input = Input(r, count);
    for (size_t j = 0; j < count; ++j) expected[j] += input[j];
  }
  std::vector<std::unique_ptr<Context>> contexts(n);
  RunOnThreads(n, [&](size_t r) {
    contexts[r] = job.Context(r, 0, "ibverbs");
    if (!contexts[r]) return;
    std::vector<char> scratch;
    const client::RingArgs ring{contexts[r].get(), &members, static_cast<int32_t>(r),
                                std::chrono::duration_cast<std::chrono::milliseconds>(kPatience),
                                &scratch};
    std::vector<float> data = Input(r, count);
    EXPECT_TRUE(IsOk(client::RingAllreduce(ring, data.data(), count, DType::kFloat32,
                                           ReduceOp::kSum)))
        << "rank " << r;
    EXPECT_TRUE(data == expected) << "rank " << r;
  });
  for (size_t r = 0; r < n; ++r)
    for (size_t peer = 0; peer < n; ++peer)
      if (peer != r && contexts[r]) {
        const PeerStats stats = contexts[r]->Stats(static_cast<int32_t>(peer));
        EXPECT_EQ(stats.link, Link::kIbverbs) << r << " -> " << peer;
        EXPECT_TRUE(stats.connected || n > 2) << r << " -> " << peer;
      }
}

TEST_F(Ibverbs, RingAllreduceOfTwoRanksMatchesTheSerialSum) {
  ExpectRingAllreduceMatches(2, (3 << 20) / sizeof(float) + 7);
}

TEST_F(Ibverbs, RingAllreduceOfThreeRanksMatchesTheSerialSum) {
  ExpectRingAllreduceMatches(3, (3 << 20) / sizeof(float) + 7);
}

// Two ranks connected by one exchange, then rank 0 waits for bytes rank 1 never sends.
struct Waiting {
  LoopbackJob job{2};
  std::unique_ptr<Context> contexts[2];

  void Connect() {
    RunOnThreads(2, [&](size_t r) {
      contexts[r] = job.Context(r, kSet, "ibverbs");
      char out = 1, in = 0;
      EXPECT_TRUE(IsOk(contexts[r]->SendRecv(static_cast<int32_t>(1 - r), &out, 1,
                                             static_cast<int32_t>(1 - r), &in, 1, In(kPatience))));
    });
  }
  Status Wait(Deadline deadline) {
    char in = 0;
    return contexts[0]->SendRecv(1, nullptr, 0, 1, &in, 1, deadline);
  }
};

TEST_F(Ibverbs, AnAbortEndsAWaitAtOnce) {
  Waiting waiting;
  waiting.Connect();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    waiting.contexts[0]->Abort(Status(Code::kAborted, "set 3 aborted"));
  });
  const auto start = Clock::now();
  EXPECT_TRUE(IsStatus(waiting.Wait(In(kPatience)), Code::kAborted, "set 3 aborted"));
  aborter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST_F(Ibverbs, TheDeadlineEndsAWaitWithTimeout) {
  Waiting waiting;
  waiting.Connect();
  const Status status = waiting.Wait(Clock::now() + std::chrono::milliseconds(300));
  EXPECT_EQ(status.code(), Code::kTimeout) << status.message();
}

TEST_F(Ibverbs, APointToPointStreamCarriesAMessageIntact) {
  LoopbackJob job(2);
  const std::vector<char> message = Pattern((3 << 20) + 1, 9);
  std::vector<char> got(message.size());
  RunOnThreads(2, [&](size_t r) {
    std::unique_ptr<Stream> stream;
    if (r == 0) {
      ASSERT_TRUE(IsOk(job.device(0).OpenStream(-4, 0, 1, PeerRoute{job.device(1).endpoint(),
                                                                    Link::kIbverbs},
                                                In(kPatience), &stream)));
      EXPECT_TRUE(IsOk(stream->Write(message.data(), message.size(), In(kPatience))));
    } else {
      ASSERT_TRUE(IsOk(job.device(1).AcceptStream(-4, 0, In(kPatience), &stream)));
      EXPECT_TRUE(IsOk(stream->Read(got.data(), got.size(), In(kPatience))));
    }
  });
  EXPECT_TRUE(got == message);
}

}  // namespace
}  // namespace tutti::transport
