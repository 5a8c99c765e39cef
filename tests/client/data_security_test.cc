// The protected TCP data plane (transport/secure/, docs/security.md): sealed channels move bytes
// intact under both modes and both ciphers; a man in the middle (a relay between the two ends,
// on loopback) that flips a byte, drops, replays or reorders a record makes the receiver fail
// with kAuthFailed at exactly that record, having delivered only the records before it; with
// security off the same relay's flipped byte arrives unnoticed (what "off" means). Then the same
// relay between two real devices, through the handshake, under a context's SendRecv.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "client/channel_checks.h"
#include "client/client_test_support.h"
#include "transport/secure/record_cipher.h"
#include "transport/secure/sealed_channel.h"
#include "transport/secure/sealed_stream.h"
#include "transport/secure/session_keys.h"
#include "transport/tcp/tcp_channel.h"
#include "transport/tcp/tcp_stream.h"

namespace tutti::transport {
namespace {

using namespace tutti::testing;

RecordAead AvailableAes() { return CpuHasAesGcm() ? RecordAead::kAes256Gcm : RecordAead::kNone; }

// Both ends' ciphers for one connection, keyed as a real handshake would key them.
struct Ends {
  std::unique_ptr<RecordCipher> a_seal, a_open, b_seal, b_open;
};
Ends KeyedEnds(DataSecurity mode, RecordAead aead) {
  uint8_t nonce_a[16], nonce_c[16];
  for (int i = 0; i < 16; ++i) nonce_a[i] = static_cast<uint8_t>(i), nonce_c[i] = static_cast<uint8_t>(100 + i);
  const SessionKeys keys = DeriveSessionKeys(NewJobSecret(), nonce_a, nonce_c, 3, 0, 1, mode, aead);
  Ends ends;
  EXPECT_TRUE(IsOk(RecordCipher::Create(mode, aead, keys.connector_to_acceptor, &ends.a_seal)));
  EXPECT_TRUE(IsOk(RecordCipher::Create(mode, aead, keys.acceptor_to_connector, &ends.a_open)));
  EXPECT_TRUE(IsOk(RecordCipher::Create(mode, aead, keys.acceptor_to_connector, &ends.b_seal)));
  EXPECT_TRUE(IsOk(RecordCipher::Create(mode, aead, keys.connector_to_acceptor, &ends.b_open)));
  return ends;
}

std::unique_ptr<Channel> Sealed(UniqueFd fd, std::unique_ptr<RecordCipher> seal,
                                std::unique_ptr<RecordCipher> open) {
  return std::make_unique<SealedChannel>(std::move(fd), std::move(seal), std::move(open));
}

using Modes = std::tuple<DataSecurity, RecordAead>;

class SealedChannelTest : public ::testing::TestWithParam<Modes> {
 protected:
  void SetUp() override {
    if (std::get<1>(GetParam()) == RecordAead::kNone) GTEST_SKIP() << "this CPU has no AES-NI";
  }
};

TEST_P(SealedChannelTest, MovesMebibytesBothWaysIntact) {
  auto [mode, aead] = GetParam();
  UniqueFd x, y;
  SocketPair(&x, &y);
  Ends ends = KeyedEnds(mode, aead);
  auto a = Sealed(std::move(x), std::move(ends.a_seal), std::move(ends.a_open));
  auto b = Sealed(std::move(y), std::move(ends.b_seal), std::move(ends.b_open));
  EXPECT_EQ(a->link(), Link::kTcp);
  ExpectBothWaysIntact(*a, *b);
}

// A receiver taking fewer bytes at a time than a record holds: the records go through the
// staging buffer, and arrive intact.
TEST_P(SealedChannelTest, ReadsInSmallerPiecesThanTheRecordsIntact) {
  auto [mode, aead] = GetParam();
  UniqueFd x, y;
  SocketPair(&x, &y);
  Ends ends = KeyedEnds(mode, aead);
  auto a = Sealed(std::move(x), std::move(ends.a_seal), std::move(ends.a_open));
  auto b = Sealed(std::move(y), std::move(ends.b_seal), std::move(ends.b_open));
  const std::vector<char> sent = Pattern(3 * kMaxRecordPayload + 17, 5);
  std::vector<char> got(sent.size());
  size_t done = 0;
  std::thread sender([&] {
    Flow ab{sent.data(), nullptr, sent.size()};
    while (ab.sent < ab.len) {
      ASSERT_TRUE(IsOk(a->TrySend(sent.data() + ab.sent, ab.len - ab.sent, &ab.sent)));
      std::vector<pollfd> fds;
      if (ab.sent < ab.len && a->PrepareWait(true, false, 1, &fds)) poll(fds.data(), fds.size(), 1000);
    }
  });
  const Deadline deadline = In(kPatience);
  while (done < got.size() && Clock::now() < deadline) {
    const size_t piece = std::min<size_t>(1000, got.size() - done);
    const size_t before = done;
    ASSERT_TRUE(IsOk(b->TryRecv(got.data() + done, piece, &done)));
    std::vector<pollfd> fds;
    if (done == before && b->PrepareWait(false, true, 1, &fds)) poll(fds.data(), fds.size(), 1000);
  }
  sender.join();
  EXPECT_TRUE(got == sent);
}

TEST_P(SealedChannelTest, EncryptHidesTheBytesIntegrityDoesNot) {
  auto [mode, aead] = GetParam();
  Ends ends = KeyedEnds(mode, aead);
  const std::vector<char> payload = Pattern(1000, 7);
  std::vector<char> record(kMaxRecordBytes);
  const size_t len = ends.a_seal->Seal(payload.data(), payload.size(), record.data());
  ASSERT_EQ(len, kRecordHeaderBytes + payload.size() + kRecordTagBytes);
  const bool clear = std::memcmp(record.data() + kRecordHeaderBytes, payload.data(), payload.size()) == 0;
  EXPECT_EQ(clear, mode == DataSecurity::kIntegrity);
  ASSERT_TRUE(ends.b_open->Open(record.data(), payload.size()));
  EXPECT_EQ(0, std::memcmp(record.data() + kRecordHeaderBytes, payload.data(), payload.size()));
}

// What a man in the middle does to the records of one direction.
// kCopy: none, and no records to parse (the plain byte stream).
enum class Attack { kNone, kFlip, kDrop, kReplay, kReorder, kFlipRaw, kCopy };

// Copies what arrives on `from` to `to` until `from` closes: first `skip` bytes as they are (a
// handshake), then record by record, doing `attack` to record number `target`. kFlipRaw flips
// one byte of the stream at offset `target` instead (for a stream without records).
class Relay {
 public:
  Relay(UniqueFd from, UniqueFd to, Attack attack, uint64_t target, size_t skip = 0)
      : from_(std::move(from)), to_(std::move(to)) {
    thread_ = std::thread([this, attack, target, skip] {
      Run(attack, target, skip);
      shutdown(to_.get(), SHUT_WR);  // the close goes on to the other side
    });
  }
  ~Relay() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Closes both ends (the relay goes away), once its thread is done.
  void Close() {
    Join();
    from_.Reset();
    to_.Reset();
  }

 private:
  bool Read(void* data, size_t len) {
    char* p = static_cast<char*>(data);
    while (len > 0) {
      const ssize_t n = read(from_.get(), p, len);
      if (n <= 0) return false;
      p += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  void Write(const std::vector<char>& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = send(to_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  void Run(Attack attack, uint64_t target, size_t skip) {
    std::vector<char> bytes(skip);
    if (skip > 0) {
      if (!Read(bytes.data(), skip)) return;
      Write(bytes);
    }
    if (attack == Attack::kFlipRaw || attack == Attack::kCopy) {
      std::vector<char> chunk(4096);
      uint64_t offset = 0;
      while (true) {
        const ssize_t n = read(from_.get(), chunk.data(), chunk.size());
        if (n <= 0) return;
        chunk.resize(static_cast<size_t>(n));
        if (attack == Attack::kFlipRaw && target >= offset && target < offset + chunk.size())
          chunk[target - offset] ^= 0x20;
        offset += chunk.size();
        Write(chunk);
        chunk.resize(4096);
      }
    }
    std::vector<char> held;
    for (uint64_t index = 0;; ++index) {
      std::vector<char> record(kRecordHeaderBytes);
      if (!Read(record.data(), kRecordHeaderBytes)) return;
      const size_t payload = RecordCipher::PayloadLength(record.data());
      record.resize(kRecordHeaderBytes + payload + kRecordTagBytes);
      if (!Read(record.data() + kRecordHeaderBytes, payload + kRecordTagBytes)) return;
      if (index != target || attack == Attack::kNone) {
        Write(record);
        if (!held.empty()) Write(held), held.clear();  // kReorder: the held one after its successor
        continue;
      }
      switch (attack) {
        case Attack::kFlip: record[kRecordHeaderBytes + payload / 2] ^= 0x20; Write(record); break;
        case Attack::kDrop: break;
        case Attack::kReplay: Write(record); Write(record); break;
        case Attack::kReorder: held = record; break;
        default: break;
      }
    }
  }

  UniqueFd from_, to_;
  std::thread thread_;
};

// a -> relay -> b over two socket pairs; b answers a directly (the other direction is not
// attacked here).
struct Tapped {
  std::unique_ptr<Channel> a, b;
  std::unique_ptr<Relay> relay;
};

constexpr size_t kRecords = 16;
constexpr size_t kMessage = kRecords * kMaxRecordPayload;  // 16 full records

// Sends kMessage from a to b through a relay doing `attack` to record `target`; returns b's status
// and how many bytes b received (those are checked against what a sent).
Status SendThroughRelay(DataSecurity mode, RecordAead aead, Attack attack, uint64_t target,
                        size_t* received) {
  UniqueFd a_end, relay_in, relay_out, b_end;
  SocketPair(&a_end, &relay_in);
  SocketPair(&relay_out, &b_end);
  std::unique_ptr<Channel> a, b;
  if (mode == DataSecurity::kOff) {
    a = std::make_unique<TcpChannel>(std::move(a_end));
    b = std::make_unique<TcpChannel>(std::move(b_end));
  } else {
    Ends ends = KeyedEnds(mode, aead);
    a = Sealed(std::move(a_end), std::move(ends.a_seal), std::move(ends.a_open));
    b = Sealed(std::move(b_end), std::move(ends.b_seal), std::move(ends.b_open));
  }
  Relay relay(std::move(relay_in), std::move(relay_out), attack, target);
  const std::vector<char> sent = Pattern(kMessage, 11);
  constexpr char kUnwritten = 0x5a;
  std::vector<char> got(kMessage, kUnwritten);
  Flow ab{sent.data(), got.data(), kMessage}, none{};
  // b fails at the attacked record; a may still be sending: its bytes sit in the relay's socket.
  Status status = Exchange(*a, *b, ab, none, In(kPatience));
  *received = ab.received;
  if (mode != DataSecurity::kOff || attack != Attack::kFlipRaw)
    EXPECT_EQ(0, std::memcmp(got.data(), sent.data(), ab.received)) << "delivered bytes differ";
  else
    EXPECT_NE(0, std::memcmp(got.data(), sent.data(), ab.received)) << "the flip went missing";
  // A record that failed its tag was received into b's buffer and opened there: none of its
  // bytes may stay (zeroed, or never written).
  if (mode != DataSecurity::kOff)
    for (size_t i = ab.received; i < kMessage; ++i)
      if (got[i] != 0 && got[i] != kUnwritten) {
        ADD_FAILURE() << "byte " << i << " of a record no tag vouched for stayed in the buffer";
        break;
      }
  // Both ends close: the relay, maybe blocked writing to b, sees its sends fail and a's close.
  a.reset();
  b.reset();
  relay.Close();
  return status;
}

std::string Tampered(uint64_t record) {
  return "data-plane record " + std::to_string(record) +
         " failed authentication: altered, replayed, reordered or dropped on the way";
}

TEST_P(SealedChannelTest, AFlippedByteFailsItsRecord) {
  auto [mode, aead] = GetParam();
  size_t received = 0;
  Status status = SendThroughRelay(mode, aead, Attack::kFlip, 5, &received);
  EXPECT_TRUE(IsStatus(status, Code::kAuthFailed, Tampered(5)));
  EXPECT_EQ(received, 5 * kMaxRecordPayload);  // records 0-4, none of 5
}

TEST_P(SealedChannelTest, ADroppedRecordFailsTheNextOne) {
  auto [mode, aead] = GetParam();
  size_t received = 0;
  Status status = SendThroughRelay(mode, aead, Attack::kDrop, 5, &received);
  EXPECT_TRUE(IsStatus(status, Code::kAuthFailed, Tampered(5)));  // record 6 arrived as the 5th
  EXPECT_EQ(received, 5 * kMaxRecordPayload);
}

TEST_P(SealedChannelTest, AReplayedRecordFails) {
  auto [mode, aead] = GetParam();
  size_t received = 0;
  Status status = SendThroughRelay(mode, aead, Attack::kReplay, 5, &received);
  EXPECT_TRUE(IsStatus(status, Code::kAuthFailed, Tampered(6)));  // record 5 again as the 6th
  EXPECT_EQ(received, 6 * kMaxRecordPayload);
}

TEST_P(SealedChannelTest, ReorderedRecordsFail) {
  auto [mode, aead] = GetParam();
  size_t received = 0;
  Status status = SendThroughRelay(mode, aead, Attack::kReorder, 5, &received);
  EXPECT_TRUE(IsStatus(status, Code::kAuthFailed, Tampered(5)));
  EXPECT_EQ(received, 5 * kMaxRecordPayload);
}

TEST_P(SealedChannelTest, AnUntouchedStreamPassesTheRelay) {
  auto [mode, aead] = GetParam();
  size_t received = 0;
  EXPECT_TRUE(IsOk(SendThroughRelay(mode, aead, Attack::kNone, 0, &received)));
  EXPECT_EQ(received, kMessage);
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndCiphers, SealedChannelTest,
    ::testing::Combine(::testing::Values(DataSecurity::kIntegrity, DataSecurity::kEncrypt),
                       ::testing::Values(AvailableAes(), RecordAead::kChaCha20Poly1305)),
    [](const ::testing::TestParamInfo<Modes>& info) {
      std::string name = DataSecurityName(std::get<0>(info.param));
      name += std::get<1>(info.param) == RecordAead::kChaCha20Poly1305 ? "_chacha20poly1305"
                                                                        : "_aes256gcm";
      return name;
    });

TEST(DataSecurityOff, AFlippedByteArrivesUnnoticed) {
  // What "off" means: the handshake proved who connected, but the bytes are not protected.
  size_t received = 0;
  EXPECT_TRUE(IsOk(SendThroughRelay(DataSecurity::kOff, RecordAead::kNone, Attack::kFlipRaw,
                                    300000, &received)));
  EXPECT_EQ(received, kMessage);
}

TEST(SealedStream, CarriesMessagesOfAnySizeAndFailsAnAlteredRecord) {
  UniqueFd x, y, relay_in, relay_out;
  SocketPair(&x, &relay_in);
  SocketPair(&relay_out, &y);
  Ends ends = KeyedEnds(DataSecurity::kEncrypt, RecordAead::kChaCha20Poly1305);
  auto writer = std::make_unique<SealedStream>(std::make_unique<TcpStream>(std::move(x), "rank 1"),
                                               std::move(ends.a_seal), "rank 1");
  auto reader = std::make_unique<SealedStream>(std::make_unique<TcpStream>(std::move(y), "rank 0"),
                                               std::move(ends.b_open), "rank 0");
  Relay relay(std::move(relay_in), std::move(relay_out), Attack::kFlip, 3);
  // Records 0-2: a small message, one of 2 records, read in other pieces than written.
  const std::vector<char> small = Pattern(10, 1), big = Pattern(kMaxRecordPayload + 5, 2);
  std::thread writing([&] {
    EXPECT_TRUE(IsOk(writer->Write(small.data(), small.size(), In(kPatience))));
    EXPECT_TRUE(IsOk(writer->Write(big.data(), big.size(), In(kPatience))));
    EXPECT_TRUE(IsOk(writer->Write(small.data(), small.size(), In(kPatience))));  // record 3
  });
  std::vector<char> got(small.size() + big.size());
  EXPECT_TRUE(IsOk(reader->Read(got.data(), 4, In(kPatience))));
  EXPECT_TRUE(IsOk(reader->Read(got.data() + 4, got.size() - 4, In(kPatience))));
  EXPECT_EQ(0, std::memcmp(got.data(), small.data(), small.size()));
  EXPECT_EQ(0, std::memcmp(got.data() + small.size(), big.data(), big.size()));
  Status status = reader->Read(got.data(), small.size(), In(kPatience));
  EXPECT_TRUE(IsStatus(status, Code::kAuthFailed,
                       "data-plane integrity: rank 0: point-to-point record 3 failed "
                       "authentication: altered, replayed, reordered or dropped on the way"));
  // Every later read fails alike.
  EXPECT_EQ(reader->Read(got.data(), 1, In(kPatience)).code(), Code::kAuthFailed);
  writing.join();
  writer.reset();  // the relay sees the close and ends
  reader.reset();
  relay.Close();
}

// A TCP relay on loopback between two real devices: accepts one connection and opens its own to
// `target`, copying the handshake as it is and attacking the connector's records. Cut() once
// both ranks closed their ends.
class ManInTheMiddle {
 public:
  ManInTheMiddle(std::string target, Attack attack, uint64_t record)
      : listener_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), target_(std::move(target)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener_.get(), 4), 0);
    socklen_t len = sizeof(addr);
    getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this, attack, record] {
      UniqueFd connector(accept(listener_.get(), nullptr, nullptr));
      UniqueFd acceptor(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      std::string host;
      uint16_t port = 0;
      ParseHostPort(target_, &host, &port);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      inet_pton(AF_INET, host.c_str(), &to.sin_addr);
      if (connect(acceptor.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) return;
      UniqueFd connector_copy(dup(connector.get())), acceptor_copy(dup(acceptor.get()));
      // Acceptor to connector: the challenge, the proof, then records, untouched.
      back_ = std::make_unique<Relay>(std::move(acceptor_copy), std::move(connector_copy),
                                      Attack::kCopy, 0);
      // Connector to acceptor: the hello, then the attacked records.
      forth_ = std::make_unique<Relay>(std::move(connector), std::move(acceptor), attack, record,
                                       sizeof(Hello));
    });
  }
  ~ManInTheMiddle() {
    if (thread_.joinable()) thread_.join();
    forth_.reset();
    back_.reset();
  }
  const std::string& endpoint() const { return endpoint_; }
  // Waits for both relays to end (they end when the ranks closed) and closes their sockets.
  void Cut() {
    if (thread_.joinable()) thread_.join();
    if (forth_) forth_->Close();
    if (back_) back_->Close();
  }

 private:
  UniqueFd listener_;
  std::string target_, endpoint_;
  std::thread thread_;
  std::unique_ptr<Relay> forth_, back_;
};

TEST(ManInTheMiddle, ThroughTheHandshakeTheAcceptorFailsAtTheAlteredRecord) {
  for (DataSecurity mode : {DataSecurity::kIntegrity, DataSecurity::kEncrypt}) {
    SCOPED_TRACE(DataSecurityName(mode));
    LoopbackJob job(2, {}, mode);
    ManInTheMiddle mitm(job.device(1).endpoint(), Attack::kFlip, 2);
    auto c0 = job.Context(0, 0, "tcp", [&](std::vector<PeerRoute>* routes) {
      (*routes)[1].endpoint = mitm.endpoint();  // rank 0 connects to rank 1 through the relay
    });
    auto c1 = job.Context(1, 0, "tcp");
    const std::vector<char> to_1 = Pattern(kMessage, 1), to_0 = Pattern(kMessage, 2);
    std::vector<char> got_1(kMessage), got_0(kMessage);
    Status status0, status1;
    RunOnThreads(2, [&](size_t r) {
      if (r == 0) {
        status0 = c0->SendRecv(1, to_1.data(), kMessage, 1, got_0.data(), kMessage, In(kPatience));
      } else {
        status1 = c1->SendRecv(0, to_0.data(), kMessage, 0, got_1.data(), kMessage, In(kPatience));
        // Rank 1 leaves the set (as tuttid's SetsBroken would make it): its connection closes.
        c1.reset();
      }
    });
    EXPECT_TRUE(IsStatus(status1, Code::kAuthFailed, "data-plane integrity: rank 0: " + Tampered(2)));
    // Rank 0 finished before rank 1 went (its direction was untouched, so what it got is rank
    // 1's), or saw rank 1 go; either way tuttid tells it why (the integrity report, tests/unit).
    if (status0.ok())
      EXPECT_TRUE(got_0 == to_0);
    else
      EXPECT_EQ(status0.code(), Code::kPeerLost) << status0.message();
    c0.reset();
    mitm.Cut();
  }
}

TEST(ManInTheMiddle, UntouchedTheProtectedPairExchangesIntact) {
  LoopbackJob job(2, {}, DataSecurity::kEncrypt);
  ManInTheMiddle mitm(job.device(1).endpoint(), Attack::kNone, 0);
  auto c0 = job.Context(0, 0, "tcp", [&](std::vector<PeerRoute>* routes) {
    (*routes)[1].endpoint = mitm.endpoint();
  });
  auto c1 = job.Context(1, 0, "tcp");
  const std::vector<char> to_1 = Pattern(kMessage + 7, 1), to_0 = Pattern(kMessage + 7, 2);
  std::vector<char> got_1(to_1.size()), got_0(to_0.size());
  RunOnThreads(2, [&](size_t r) {
    Status status = r == 0 ? c0->SendRecv(1, to_1.data(), to_1.size(), 1, got_0.data(), got_0.size(), In(kPatience))
                           : c1->SendRecv(0, to_0.data(), to_0.size(), 0, got_1.data(), got_1.size(), In(kPatience));
    EXPECT_TRUE(IsOk(status));
  });
  EXPECT_TRUE(got_1 == to_1);
  EXPECT_TRUE(got_0 == to_0);
  c0.reset();
  c1.reset();
  mitm.Cut();
}

}  // namespace
}  // namespace tutti::transport
