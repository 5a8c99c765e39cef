// The data-plane handshake (transport/handshake.h) against what no rank of the job would send:
// a hello replayed from an earlier connection, one signed with another job's secret, and forged
// claims arriving before the secret is known. Real sockets, real devices, one process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "transport/fd_io.h"
#include "transport/handshake.h"
#include "transport/secure/record_cipher.h"
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
  // The acceptor's answer to a hello it verified.
  Status ReadProof(Proof* proof, double seconds = 30) {
    return ReadFully(fd_.get(), proof, sizeof(*proof), In(seconds), -1, "device");
  }

 private:
  UniqueFd fd_;
};

Hello Signed(const std::string& secret, const Challenge& challenge,
             DataSecurity security = DataSecurity::kOff) {
  return NewHello(secret, challenge, kHelloMagic, kSet, kConnector, kAcceptor, security);
}

TEST(Handshake, GenuineConnectionIsAccepted) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(), connector = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kOff);
  connector->SetJobSecret(secret, kConnector, DataSecurity::kOff);
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
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kOff);
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
  acceptor->SetJobSecret(NewJobSecret(), kAcceptor, DataSecurity::kOff);
  RawConnection outsider(*acceptor);
  outsider.Send(Signed(NewJobSecret(), outsider.ReadChallenge()));
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

TEST(Handshake, HelloMeantForAnotherRankIsRefused) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kOff);
  RawConnection misdirected(*acceptor);
  misdirected.Send(NewHello(secret, misdirected.ReadChallenge(), kHelloMagic, kSet, kConnector,
                            kAcceptor + 1, DataSecurity::kOff));
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

TEST(Handshake, ForgedClaimBeforeTheSecretIsKnownDoesNotDisplaceTheRealOne) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice(), connector = NewDevice();
  connector->SetJobSecret(secret, kConnector, DataSecurity::kOff);
  // The acceptor has not heard its Welcome yet: both connections are parked unverified, and the
  // genuine connector waits for the acceptor's proof, which comes with the secret.
  RawConnection forger(*acceptor);
  forger.Send(Signed(NewJobSecret(), forger.ReadChallenge()));
  UniqueFd fd;
  Status connected;
  std::thread connecting([&] {
    connected = connector->ConnectTcp(kSet, kConnector, kAcceptor, acceptor->endpoint(), In(30),
                                      -1, &fd);
  });
  RawConnection late_forger(*acceptor);
  late_forger.Send(Signed(NewJobSecret(), late_forger.ReadChallenge()));
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kOff);
  connecting.join();
  ASSERT_TRUE(connected.ok()) << connected.message();
  // Forgers get no proof: their connections are closed.
  Proof proof{};
  EXPECT_EQ(forger.ReadProof(&proof).code(), Code::kPeerLost);
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  // The genuine connection is the one accepted: what the connector writes arrives.
  const char ping[] = "ping";
  ASSERT_TRUE(WriteFully(fd.get(), ping, sizeof(ping), In(30), -1, "acceptor").ok());
  char got[sizeof(ping)] = {};
  status = ReadFully(accepted.fd.get(), got, sizeof(got), In(30), -1, "connector");
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_STREQ(got, "ping");
}

TEST(Handshake, AFloodOfForgedClaimsBeforeTheSecretDoesNotPushOutTheGenuineOne) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice();
  // The genuine connector's hello, then six forgeries, all before the acceptor's Welcome. The
  // acceptor reads hellos one connection at a time, so a forger's challenge arriving means the
  // connection before it was parked (or refused).
  RawConnection genuine(*acceptor);
  genuine.Send(Signed(secret, genuine.ReadChallenge()));
  std::vector<std::unique_ptr<RawConnection>> forgers;
  for (int i = 0; i < 6; ++i) {
    forgers.push_back(std::make_unique<RawConnection>(*acceptor));
    forgers.back()->Send(Signed(NewJobSecret(), forgers.back()->ReadChallenge()));
  }
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kOff);
  Proof proof{};
  ASSERT_TRUE(genuine.ReadProof(&proof).ok());
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(30), -1, &accepted);
  ASSERT_TRUE(status.ok()) << status.message();
  // Every forger's connection is closed without a proof: the three parked beside the genuine
  // claim once checked, the three beyond the four kept per rank at once.
  for (auto& forger : forgers) EXPECT_EQ(forger->ReadProof(&proof).code(), Code::kPeerLost);
}

// A listener that speaks the handshake but does not know the job's secret: it sends a challenge
// and, for the connector's hello, a proof it cannot compute.
class Impostor {
 public:
  Impostor() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_.get(), 4), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] {
      UniqueFd peer(accept(fd_.get(), nullptr, nullptr));
      const Challenge challenge = NewChallenge();
      Hello hello{};
      if (!WriteFully(peer.get(), &challenge, sizeof(challenge), In(30), -1, "connector").ok() ||
          !ReadFully(peer.get(), &hello, sizeof(hello), In(30), -1, "connector").ok())
        return;
      // Its best guess: a proof under a secret of its own.
      const Proof proof = NewProof(NewJobSecret(), challenge, hello);
      (void)WriteFully(peer.get(), &proof, sizeof(proof), In(30), -1, "connector");
      char byte;
      (void)ReadFully(peer.get(), &byte, 1, In(30), -1, "connector");  // until the connector closes
    });
  }
  ~Impostor() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  UniqueFd fd_;
  std::string endpoint_;
  std::thread thread_;
};

TEST(Handshake, AnAcceptorThatCannotProveItselfIsRefused) {
  auto connector = NewDevice();
  connector->SetJobSecret(NewJobSecret(), kConnector, DataSecurity::kOff);
  Impostor impostor;
  UniqueFd fd;
  Status status = connector->ConnectTcp(kSet, kConnector, kAcceptor, impostor.endpoint(), In(30),
                                        -1, &fd);
  EXPECT_EQ(status.code(), Code::kAuthFailed);
  EXPECT_EQ(status.message(),
            "authentication failed: rank 1 at " + impostor.endpoint() +
                " did not prove it belongs to this job (its data-plane handshake answer does not "
                "verify under the job's secret)");
  EXPECT_FALSE(fd);
}

TEST(Handshake, TheProofNamesTheCipherBothEndsRun) {
  const std::string secret = NewJobSecret();
  const Challenge challenge = NewChallenge();
  Hello hello = NewHello(secret, challenge, kHelloMagic, kSet, kConnector, kAcceptor,
                         DataSecurity::kEncrypt);
  Proof proof = NewProof(secret, challenge, hello);
  EXPECT_TRUE(VerifyProof(secret, challenge, hello, proof));
  EXPECT_EQ(static_cast<RecordAead>(proof.aead), FastestAead(DataSecurity::kEncrypt));
  // A connector whose fastest is not the acceptor's gets ChaCha20-Poly1305.
  hello.aeads = 0;
  SignHello(secret, challenge, &hello);
  proof = NewProof(secret, challenge, hello);
  EXPECT_EQ(static_cast<RecordAead>(proof.aead), RecordAead::kChaCha20Poly1305);
  EXPECT_TRUE(VerifyProof(secret, challenge, hello, proof));
  // ...and a proof that claims AES-GCM for it does not verify, nor one for another hello or
  // secret.
  Proof forced = proof;
  forced.aead = static_cast<uint32_t>(RecordAead::kAes256Gcm);
  EXPECT_FALSE(VerifyProof(secret, challenge, hello, forced));
  EXPECT_FALSE(VerifyProof(NewJobSecret(), challenge, hello, proof));
  Hello other = hello;
  other.nonce[0] ^= 1;
  EXPECT_FALSE(VerifyProof(secret, challenge, other, proof));
  // With security off there is no cipher.
  Hello off = NewHello(secret, challenge, kHelloMagic, kSet, kConnector, kAcceptor, DataSecurity::kOff);
  EXPECT_EQ(static_cast<RecordAead>(NewProof(secret, challenge, off).aead), RecordAead::kNone);
}

TEST(Handshake, ADifferentDataSecuritySettingIsRefused) {
  const std::string secret = NewJobSecret();
  auto acceptor = NewDevice();
  acceptor->SetJobSecret(secret, kAcceptor, DataSecurity::kEncrypt);
  RawConnection plain(*acceptor);
  plain.Send(Signed(secret, plain.ReadChallenge(), DataSecurity::kOff));
  Proof proof{};
  EXPECT_EQ(plain.ReadProof(&proof).code(), Code::kPeerLost);  // dropped, unanswered
  Accepted accepted;
  Status status = acceptor->Accept(kSet, kConnector, In(2), -1, &accepted);
  EXPECT_EQ(status.code(), Code::kAuthFailed) << status.message();
}

}  // namespace
}  // namespace tutti::transport
