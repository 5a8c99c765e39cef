// The ibverbs backend's bootstrap over real loopback sockets and real devices, with no RDMA
// device needed (transport/ibverbs/ibverbs_setup.h): the ibverbs hello is parked as that
// backend's and its MAC covers its magic; queue-pair parameters verify only in their direction,
// on their connection, under the job's secret; and the backend's own accepting side, which finds
// no device here through the real discovery, answers an offer with a signed refusal naming why
// and carries the pair over the same connection as TCP. A forged or foreign offer is refused by
// name. Whether queue pairs then move bytes is tests/rdma's, where a device exists.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <thread>

#include "client/channel_checks.h"
#include "rdma/no_device.h"
#include "transport/backend.h"
#include "transport/handshake.h"
#include "transport/ibverbs/qp_params.h"
#include "transport/socket_device.h"

namespace tutti::transport {
namespace {

using ibverbs::Bootstrap;
using ibverbs::QpAnswer;
using ibverbs::QpParams;
using tutti::testing::IsStatus;

constexpr int32_t kSet = 9;
constexpr int32_t kConnector = 0, kAcceptor = 1;

std::unique_ptr<SocketDevice> NewDevice(const std::string& secret, int32_t self) {
  std::unique_ptr<Device> device;
  Status status = CreateDevice("127.0.0.1", &device);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!secret.empty()) device->SetJobSecret(secret, self, DataSecurity::kOff);
  return std::unique_ptr<SocketDevice>(static_cast<SocketDevice*>(device.release()));
}

Deadline In(int seconds) { return Clock::now() + std::chrono::seconds(seconds); }

void SkipWhereADeviceExists() {
  if (const std::string device = tutti::testing::ListedRdmaDevice(); !device.empty())
    GTEST_SKIP() << "an RDMA device exists (" << device << "): tests/rdma runs instead";
}

// An offer as a connector would make it (the numbers need not name a real queue pair here).
QpParams Offer() {
  QpParams offer;
  offer.answer = static_cast<uint16_t>(QpAnswer::kOffer);
  offer.qpn = 0x42;
  offer.psn = 0x1234;
  offer.lid = 3;
  offer.mtu = 5;
  offer.link_layer = ibverbs::kLinkLayerInfiniband;
  offer.gid[15] = 1;
  offer.ring_addr = 0x10000;
  offer.slots = 16;
  offer.slot_bytes = 256 << 10;
  return offer;
}

TEST(IbverbsHello, IsParkedAsIbverbsWithTheChallengeItAnswered) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(secret, kAcceptor), connector = NewDevice(secret, kConnector);
  UniqueFd fd;
  Session session;
  ASSERT_TRUE(connector
                  ->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30), -1, &fd,
                               kIbverbsHelloMagic, &session)
                  .ok());
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(accepted.link, Link::kIbverbs);
  EXPECT_EQ(accepted.self, kAcceptor);
  EXPECT_EQ(accepted.peer, kConnector);
  EXPECT_EQ(0, std::memcmp(accepted.session.challenge.nonce, session.challenge.nonce,
                           sizeof(session.challenge.nonce)));
}

TEST(IbverbsHello, AHelloSignedForTcpCannotPoseAsIbverbs) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(secret, kAcceptor);
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(ParseHostPort(acceptor->endpoint(), &host, &port));
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  Challenge challenge{};
  ASSERT_TRUE(ReadFully(fd.get(), &challenge, sizeof(challenge), In(30), -1, "device").ok());
  Hello hello = NewHello(secret, challenge, kHelloMagic, kSet, kConnector, kAcceptor,
                         DataSecurity::kOff);
  hello.magic = kIbverbsHelloMagic;  // the MAC of a TCP hello, relabelled
  ASSERT_TRUE(WriteFully(fd.get(), &hello, sizeof(hello), In(30), -1, "device").ok());
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

TEST(IbverbsParams, VerifyOnlyInTheirDirectionOnTheirConnectionUnderTheJobsSecret) {
  const std::string secret = NewJobSecret();
  const Challenge challenge = NewChallenge(), other = NewChallenge();
  QpParams offer = Offer();
  const size_t bytes = offsetof(QpParams, mac);
  SignParams(secret, challenge, kConnector, kAcceptor, &offer, bytes, offer.mac);
  auto verifies = [&](const std::string& key, const Challenge& nonce, int32_t from, int32_t to,
                      const QpParams& params) {
    return VerifyParams(key, nonce, from, to, &params, bytes, params.mac);
  };
  EXPECT_TRUE(verifies(secret, challenge, kConnector, kAcceptor, offer));
  // Reflected back as if from the acceptor, replayed on another connection, or from another job.
  EXPECT_FALSE(verifies(secret, challenge, kAcceptor, kConnector, offer));
  EXPECT_FALSE(verifies(secret, other, kConnector, kAcceptor, offer));
  EXPECT_FALSE(verifies(NewJobSecret(), challenge, kConnector, kAcceptor, offer));
  EXPECT_FALSE(verifies("", challenge, kConnector, kAcceptor, offer));
  // Any field changed on the way: another queue pair number, another key.
  QpParams altered = offer;
  altered.qpn ^= 1;
  EXPECT_FALSE(verifies(secret, challenge, kConnector, kAcceptor, altered));
  altered = offer;
  altered.ring_rkey ^= 0x80000000u;
  EXPECT_FALSE(verifies(secret, challenge, kConnector, kAcceptor, altered));
}

// The connecting half by hand (a real connector needs a device to get this far), the accepting
// half the backend's own Adopt on a lane-like thread.
struct Exchange {
  std::string secret = NewJobSecret();
  std::unique_ptr<SocketDevice> acceptor = NewDevice(secret, kAcceptor);
  std::unique_ptr<SocketDevice> connector = NewDevice(secret, kConnector);
  UniqueFd fd;
  Session session;
  Status adopted;
  std::unique_ptr<Channel> acceptor_channel;

  // Dials with the ibverbs hello, sends `offer` signed by `signer` (the connector's own device
  // by default), and has the acceptor take the connection as the ibverbs backend.
  void Run(QpParams offer, SocketDevice* signer = nullptr) {
    ASSERT_TRUE(connector
                    ->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30), -1,
                                 &fd, kIbverbsHelloMagic, &session)
                    .ok());
    std::thread lane([&] {
      Accepted accepted;
      adopted = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
      if (!adopted.ok()) return;
      const Backend* backend = FindBackend(accepted.link);
      adopted = backend->Adopt(acceptor.get(), std::move(accepted), &acceptor_channel);
    });
    const Bootstrap bootstrap{signer ? signer : connector.get(), fd.get(), session.challenge, kConnector,
                              kAcceptor, In(30), -1};
    Status sent = ibverbs::SendParams(bootstrap, &offer);
    lane.join();
    ASSERT_TRUE(sent.ok()) << sent.message();
  }
  Bootstrap ConnectorSide() {
    return Bootstrap{connector.get(), fd.get(), session.challenge, kConnector, kAcceptor, In(30), -1};
  }
};

TEST(IbverbsBackend, WithoutAnRdmaDeviceTheAcceptorRefusesSignedAndThePairRunsOverTcp) {
  SkipWhereADeviceExists();
  if (IsSkipped()) return;
  Exchange exchange;
  exchange.Run(Offer());
  ASSERT_TRUE(exchange.adopted.ok()) << exchange.adopted.message();
  ASSERT_NE(exchange.acceptor_channel, nullptr);
  EXPECT_EQ(exchange.acceptor_channel->link(), Link::kTcp);
  // The refusal is signed by the acceptor (it proves itself, unlike a bare hello) and says why,
  // in the words of the real discovery.
  QpParams answer;
  Status status = ibverbs::ReceiveParams(exchange.ConnectorSide(), &answer);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(ibverbs::CheckKind(answer, QpAnswer::kAccept).ok());
  EXPECT_EQ(answer.answer, static_cast<uint16_t>(QpAnswer::kRefuse));
  EXPECT_EQ(ibverbs::Reason(answer), tutti::testing::NoRdmaDeviceReason().substr(0, 63));
  // Both ends then carry the pair as TCP over that connection, as the connector's backend does.
  Accepted tcp;
  tcp.fd = std::move(exchange.fd);
  std::unique_ptr<Channel> connector_channel;
  ASSERT_TRUE(FindBackend(Link::kTcp)
                  ->Adopt(exchange.connector.get(), std::move(tcp), &connector_channel)
                  .ok());
  tutti::testing::ExpectBothWaysIntact(*connector_channel, *exchange.acceptor_channel);
}

TEST(IbverbsBackend, AnOfferSignedWithAnotherSecretIsRefusedAsAuthentication) {
  Exchange exchange;
  auto outsider = NewDevice(NewJobSecret(), kConnector);
  exchange.Run(Offer(), outsider.get());
  EXPECT_TRUE(IsStatus(exchange.adopted, Code::kAuthFailed,
                       "authentication failed: the ibverbs queue-pair parameters from rank 0 do "
                       "not verify under the job's secret"));
  EXPECT_EQ(exchange.acceptor_channel, nullptr);
}

TEST(IbverbsBackend, AnOfferOfAnotherVersionIsRefusedByName) {
  Exchange exchange;
  QpParams offer = Offer();
  offer.version = 2;
  exchange.Run(offer);
  EXPECT_TRUE(IsStatus(exchange.adopted, Code::kVersionMismatch,
                       "ibverbs: the peer speaks queue-pair parameters version 2, this rank 1 "
                       "(mixed tutti versions?)"));
}

TEST(IbverbsBackend, AConnectorThatNeverOffersEndsAtTheDeadlineOfTheAccept) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(secret, kAcceptor), connector = NewDevice(secret, kConnector);
  UniqueFd fd;
  Session session;
  ASSERT_TRUE(connector
                  ->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30), -1, &fd,
                               kIbverbsHelloMagic, &session)
                  .ok());
  Accepted accepted;
  ASSERT_TRUE(acceptor->Accept(kSet, kConnector, Clock::now() + std::chrono::milliseconds(300), -1,
                               &accepted)
                  .ok());
  std::unique_ptr<Channel> channel;
  const auto start = Clock::now();
  Status status = FindBackend(accepted.link)->Adopt(acceptor.get(), std::move(accepted), &channel);
  EXPECT_EQ(status.code(), Code::kTimeout) << status.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tutti::transport
