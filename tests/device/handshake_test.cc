// The data-plane handshake (transport/handshake.h) against what no rank of the job would send:
// a hello replayed from an earlier connection, one signed with another job's secret, and forged
// claims arriving before the secret is known. Real sockets, real devices, one process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "transport/fd_io.h"
#include "transport/handshake.h"
#include "transport/socket_device.h"

namespace tutti::transport {
namespace {

constexpr int32_t kSet = 7;
constexpr int32_t kConnector = 0, kAcceptor = 1;

std::unique_ptr<SocketDevice> NewDevice() {
  std::unique_ptr<Device> device;
  Status status = CreateDevice("127.0.0.1", &device);
  EXPECT_TRUE(status.ok()) << status.message();
  return std::unique_ptr<SocketDevice>(static_cast<SocketDevice*>(device.release()));
}

Deadline In(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

// A raw TCP connection to `device`'s data-plane listener, as a process outside the job makes it.
class RawConnection {
 public:
  explicit RawConnection(const SocketDevice& device) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    std::string host;
    uint16_t port = 0;
    EXPECT_TRUE(ParseHostPort(device.endpoint(), &host, &port));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    EXPECT_EQ(connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  Challenge ReadChallenge() {
    Challenge challenge{};
    Status status = ReadFully(fd_.get(), &challenge, sizeof(challenge), In(30), -1, "device");
    EXPECT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(challenge.magic, kChallengeMagic);
    return challenge;
  }
  void Send(const Hello& hello) {
    Status status = WriteFully(fd_.get(), &hello, sizeof(hello), In(30), -1, "device");
    EXPECT_TRUE(status.ok()) << status.message();
  }

 private:
  UniqueFd fd_;
};

Hello Signed(const std::string& secret, const Challenge& challenge) {
  Hello hello{kHelloMagic, kSet, kConnector, kAcceptor, {}};
  SignHello(secret, challenge, &hello);
  return hello;
}

TEST(Handshake, GenuineConnectionIsAccepted) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(), connector = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor);
  connector->SetJobSecret(secret, kConnector);
  UniqueFd fd;
  Status status = connector->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30),
                                        -1, &fd);
  ASSERT_TRUE(status.ok()) << status.message();
  Accepted accepted;
  status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(accepted.link, Link::kTcp);
}

TEST(Handshake, ReplayedHelloIsRefused) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor);
  // A genuine exchange, recorded by an eavesdropper...
  RawConnection genuine(*acceptor);
  const Hello recorded = Signed(secret, genuine.ReadChallenge());
  genuine.Send(recorded);
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  // ...and replayed on a new connection, which was asked to sign another nonce.
  RawConnection replay(*acceptor);
  replay.ReadChallenge();
  replay.Send(recorded);
  status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed);
  EXPECT_EQ(status.message(),
            "authentication failed: waiting for rank 0 on process set 7, only connections that "
            "failed the data-plane handshake came (not from this job, or a replayed hello)");
}

TEST(Handshake, AnotherJobsSecretIsRefused) {
  auto acceptor = NewDevice();
  acceptor->SetJobSecret(NewJobSecret(), kAcceptor);
  RawConnection outsider(*acceptor);
  outsider.Send(Signed(NewJobSecret(), outsider.ReadChallenge()));
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

TEST(Handshake, HelloMeantForAnotherRankIsRefused) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor);
  RawConnection misdirected(*acceptor);
  Hello hello{kHelloMagic, kSet, kConnector, kAcceptor + 1, {}};
  SignHello(secret, misdirected.ReadChallenge(), &hello);
  misdirected.Send(hello);
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

TEST(Handshake, ForgedClaimBeforeTheSecretIsKnownDoesNotDisplaceTheRealOne) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(), connector = NewDevice();
  connector->SetJobSecret(secret, kConnector);
  // The acceptor has not heard its Welcome yet: both connections are parked unverified.
  RawConnection forger(*acceptor);
  forger.Send(Signed(NewJobSecret(), forger.ReadChallenge()));
  UniqueFd fd;
  Status status = connector->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30),
                                        -1, &fd);
  ASSERT_TRUE(status.ok()) << status.message();
  RawConnection late_forger(*acceptor);
  late_forger.Send(Signed(NewJobSecret(), late_forger.ReadChallenge()));
  acceptor->SetJobSecret(secret, kAcceptor);
  Accepted accepted;
  status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  // The genuine connection is the one accepted: what the connector writes arrives.
  const char ping[] = "ping";
  ASSERT_TRUE(WriteFully(fd.get(), ping, sizeof(ping), In(30), -1, "acceptor").ok());
  char got[sizeof(ping)] = {};
  status = ReadFully(accepted.fd.get(), got, sizeof(got), In(30), -1, "connector");
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_STREQ(got, "ping");
}

}  // namespace
}  // namespace tutti::transport
