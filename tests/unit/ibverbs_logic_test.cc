// The parts of the ibverbs backend (transport/ibverbs/) that need no device, against their own
// small interfaces: the immediate's encoding and credit accounting (credit_window.h), the
// receiver's slots (inbound_slots.h), a simulated pair exchanging through both under random
// reads, the registration cache's LRU eviction with a fake registrar (registration_cache.h), the
// connection's steps (connection_state.h), and the checks every queue-pair message passes
// (qp_params.h). These say nothing about whether the backend moves bytes on an RDMA device; only
// tests/rdma, run where one exists, does (docs/transports.md, "ibverbs").
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "transport/ibverbs/connection_state.h"
#include "transport/ibverbs/credit_window.h"
#include "transport/ibverbs/inbound_slots.h"
#include "transport/ibverbs/qp_params.h"
#include "transport/ibverbs/registration_cache.h"

namespace tutti::transport::ibverbs {
namespace {

::testing::AssertionResult IsStatus(const Status& status, Code code, const std::string& message) {
  if (status.code() == code && status.message() == message) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got code " << static_cast<int>(status.code()) << " \""
                                       << status.message() << "\", expected code "
                                       << static_cast<int>(code) << " \"" << message << "\"";
}

// ---- the immediate and the credits -------------------------------------------------------------

TEST(IbverbsImmediate, CarriesBytesAndCreditsSeparately) {
  for (uint32_t bytes : {0u, 1u, 4096u, 256u << 10, kMaxImmediateBytes})
    for (uint32_t credits : {0u, 1u, 4u, 16u, kMaxImmediateCredits}) {
      const Immediate decoded = DecodeImmediate(EncodeImmediate(bytes, credits));
      EXPECT_EQ(decoded.bytes, bytes);
      EXPECT_EQ(decoded.credits, credits);
    }
  EXPECT_EQ(EncodeImmediate(0, 1), 1u << 24);
}

TEST(IbverbsCredits, ASenderHasOneCreditPerSlotOfThePeersRing) {
  CreditWindow window(16, 4);
  EXPECT_EQ(window.credits(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(window.Take()) << i;
  EXPECT_FALSE(window.Take());
  EXPECT_EQ(window.credits(), 0u);
  EXPECT_TRUE(window.Returned(3).ok());
  EXPECT_EQ(window.credits(), 3u);
}

TEST(IbverbsCredits, MoreReturnedThanWereOutIsAPeerOutsideTheProtocol) {
  CreditWindow window(16, 4);
  ASSERT_TRUE(window.Take());
  ASSERT_TRUE(window.Take());
  EXPECT_TRUE(IsStatus(window.Returned(3), Code::kPeerLost,
                       "ibverbs: the peer returned 3 credits, only 2 were out"));
  EXPECT_EQ(window.credits(), 14u);  // unchanged
  EXPECT_TRUE(window.Returned(2).ok());
  EXPECT_TRUE(IsStatus(window.Returned(1), Code::kPeerLost,
                       "ibverbs: the peer returned 1 credits, only 0 were out"));
}

TEST(IbverbsCredits, OwedCreditsGoBackInBatchesOrWithAWriteGoingOutAnyway) {
  CreditWindow window(16, 4);
  window.Freed(3);
  EXPECT_EQ(window.TakeOwed(false), 0u);  // under a batch: not worth a message
  EXPECT_EQ(window.owed(), 3u);
  EXPECT_EQ(window.TakeOwed(true), 3u);  // a data write carries them for free
  EXPECT_EQ(window.owed(), 0u);
  EXPECT_EQ(window.TakeOwed(true), 0u);
  window.Freed(2);
  window.Freed(2);
  EXPECT_EQ(window.TakeOwed(false), 4u);
  EXPECT_EQ(window.owed(), 0u);
}

// ---- the receiver's slots ----------------------------------------------------------------------

TEST(IbverbsInboundSlots, ReadsAcrossSlotsInArrivalOrderAndFreesEachWhenEmpty) {
  std::vector<char> ring(4 * 8);
  InboundSlots slots(ring.data(), 4, 8);
  std::memcpy(&ring[0], "abcdefgh", 8);
  std::memcpy(&ring[8], "ij", 2);
  ASSERT_TRUE(slots.Arrived(8).ok());
  ASSERT_TRUE(slots.Arrived(2).ok());
  EXPECT_EQ(slots.readable(), 10u);
  EXPECT_EQ(slots.filled(), 2u);
  char out[16] = {};
  uint32_t freed = 0;
  EXPECT_EQ(slots.Read(out, 5, &freed), 5u);
  EXPECT_EQ(freed, 0u);
  EXPECT_EQ(std::string(out, 5), "abcde");
  EXPECT_EQ(slots.Read(out, 16, &freed), 5u);
  EXPECT_EQ(freed, 2u);
  EXPECT_EQ(std::string(out, 5), "fghij");
  EXPECT_EQ(slots.readable(), 0u);
  EXPECT_EQ(slots.Read(out, 16, &freed), 0u);
}

TEST(IbverbsInboundSlots, WrapsAroundTheRing) {
  std::vector<char> ring(2 * 4);
  InboundSlots slots(ring.data(), 2, 4);
  char out[4];
  uint32_t freed = 0;
  for (char c = 'a'; c < 'a' + 5; ++c) {  // slot 0, 1, 0, 1, 0
    const size_t slot = static_cast<size_t>(c - 'a') % 2;
    std::memset(&ring[slot * 4], c, 3);
    ASSERT_TRUE(slots.Arrived(3).ok());
    ASSERT_EQ(slots.Read(out, 4, &freed), 3u);
    EXPECT_EQ(freed, 1u);
    EXPECT_EQ(std::string(out, 3), std::string(3, c));
  }
}

TEST(IbverbsInboundSlots, AWriteBeyondTheCreditsOrTheSlotIsRefused) {
  std::vector<char> ring(2 * 4);
  InboundSlots slots(ring.data(), 2, 4);
  EXPECT_TRUE(IsStatus(slots.Arrived(5), Code::kPeerLost,
                       "ibverbs: the peer wrote 5 bytes into a slot of 4"));
  EXPECT_TRUE(IsStatus(slots.Arrived(0), Code::kPeerLost,
                       "ibverbs: the peer wrote 0 bytes into a slot of 4"));
  ASSERT_TRUE(slots.Arrived(4).ok());
  ASSERT_TRUE(slots.Arrived(1).ok());
  EXPECT_TRUE(IsStatus(slots.Arrived(1), Code::kPeerLost,
                       "ibverbs: the peer wrote into a full ring (2 slots): it ignored its "
                       "credits"));
  EXPECT_EQ(slots.readable(), 5u);
}

// Two ends exchanging a stream each way, as two channels would: data writes take a credit, land
// in the peer's next slot in order and carry owed credits; credit messages go when a batch is
// owed; each end reads random amounts at random times. Every byte arrives in order, no write ever
// finds a full ring, and neither side is stuck while the other wants bytes.
TEST(IbverbsCredits, ASimulatedPairNeverOverrunsARingAndNeverStalls) {
  constexpr uint32_t kSlots = 8, kSlotBytes = 64, kBatch = 2;
  struct Message {
    uint32_t immediate;
    std::vector<char> bytes;
  };
  struct End {
    std::vector<char> ring = std::vector<char>(kSlots * kSlotBytes);
    CreditWindow credits{kSlots, kBatch};
    InboundSlots inbound{ring.data(), kSlots, kSlotBytes};
    uint32_t next_slot = 0;  // of the peer's ring
    std::vector<char> to_send, received;
    size_t sent = 0;
    std::deque<Message> wire;  // toward the peer, in order
  };
  std::mt19937 random(7);
  End ends[2];
  for (int e = 0; e < 2; ++e) {
    ends[e].to_send.resize(20000 + 3 * e);
    for (char& c : ends[e].to_send) c = static_cast<char>(random());
  }
  auto deliver = [&](End& from, End& to) -> Status {
    while (!from.wire.empty()) {
      Message message = std::move(from.wire.front());
      from.wire.pop_front();
      const Immediate immediate = DecodeImmediate(message.immediate);
      TUTTI_RETURN_IF_ERROR(to.credits.Returned(immediate.credits));
      // The bytes are already in the slot, as an RDMA write's are before its completion.
      if (immediate.bytes > 0) TUTTI_RETURN_IF_ERROR(to.inbound.Arrived(immediate.bytes));
    }
    return Status::Ok();
  };
  size_t rounds = 0;
  while ((ends[0].received.size() < ends[1].to_send.size() ||
          ends[1].received.size() < ends[0].to_send.size()) &&
         rounds++ < 100000) {
    for (int e = 0; e < 2; ++e) {
      End& self = ends[e];
      End& peer = ends[1 - e];
      if (random() % 2 && self.sent < self.to_send.size() && self.credits.Take()) {
        const uint32_t n = std::min<size_t>(kSlotBytes, self.to_send.size() - self.sent);
        std::memcpy(&peer.ring[size_t{self.next_slot} * kSlotBytes], &self.to_send[self.sent], n);
        self.next_slot = (self.next_slot + 1) % kSlots;
        self.sent += n;
        self.wire.push_back({EncodeImmediate(n, self.credits.TakeOwed(true)), {}});
      }
      if (random() % 3 == 0) {
        char buffer[100];
        uint32_t freed = 0;
        const size_t n = self.inbound.Read(buffer, 1 + random() % sizeof(buffer), &freed);
        self.received.insert(self.received.end(), buffer, buffer + n);
        self.credits.Freed(freed);
        if (const uint32_t credits = self.credits.TakeOwed(false))
          self.wire.push_back({EncodeImmediate(0, credits), {}});
      }
      if (random() % 2) {
        const Status delivered = deliver(self, peer);
        ASSERT_TRUE(delivered.ok()) << delivered.message();
      }
      ASSERT_LE(self.credits.credits(), kSlots);
    }
  }
  EXPECT_TRUE(ends[0].received == ends[1].to_send) << "bytes toward end 0 differ";
  EXPECT_TRUE(ends[1].received == ends[0].to_send) << "bytes toward end 1 differ";
}

// ---- the registration cache --------------------------------------------------------------------

// Records what it was asked; keys count up.
class FakeRegistrar : public Registrar {
 public:
  Status Register(uintptr_t begin, size_t len, MemoryKeys* keys, void** handle) override {
    if (fail) return Status(Code::kInternal, "ibverbs: ibv_reg_mr: Cannot allocate memory");
    ++next;
    live[next] = {begin, len};
    *keys = MemoryKeys{next, next + 1000};
    *handle = reinterpret_cast<void*>(uintptr_t{next});
    registered.push_back({begin, len});
    return Status::Ok();
  }
  void Deregister(void* handle) override {
    live.erase(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle)));
    ++deregistered;
  }
  bool fail = false;
  uint32_t next = 0;
  int deregistered = 0;
  std::map<uint32_t, std::pair<uintptr_t, size_t>> live;
  std::vector<std::pair<uintptr_t, size_t>> registered;
};

const void* At(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(IbverbsRegistrationCache, RegistersWholePagesOnceAndHitsInsideThem) {
  FakeRegistrar registrar;
  RegistrationCache cache(&registrar, 8, 1 << 20);
  RegistrationCache::Lease lease;
  ASSERT_TRUE(cache.Acquire(At(0x10010), 0x2000, &lease).ok());
  ASSERT_TRUE(lease);
  ASSERT_EQ(registrar.registered.size(), 1u);
  EXPECT_EQ(registrar.registered[0], std::make_pair(uintptr_t{0x10000}, size_t{0x3000}));
  EXPECT_EQ(lease.keys.lkey, 1u);
  cache.Release(lease);
  // Any range inside the registered pages hits.
  ASSERT_TRUE(cache.Acquire(At(0x11000), 0x1fff, &lease).ok());
  EXPECT_EQ(lease.keys.lkey, 1u);
  cache.Release(lease);
  EXPECT_EQ(registrar.registered.size(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.bytes(), 0x3000u);
  // One byte past them misses.
  ASSERT_TRUE(cache.Acquire(At(0x11000), 0x2001, &lease).ok());
  EXPECT_EQ(lease.keys.lkey, 2u);
  cache.Release(lease);
}

TEST(IbverbsRegistrationCache, EvictsTheLeastRecentlyUsedWhenFull) {
  FakeRegistrar registrar;
  RegistrationCache cache(&registrar, 3, 1 << 20);
  RegistrationCache::Lease lease;
  for (uintptr_t page : {1, 2, 3}) {
    ASSERT_TRUE(cache.Acquire(At(page << 16), 100, &lease).ok());
    cache.Release(lease);
  }
  // Page 1 used again: page 2 is now the least recently used.
  ASSERT_TRUE(cache.Acquire(At(1 << 16), 100, &lease).ok());
  cache.Release(lease);
  ASSERT_TRUE(cache.Acquire(At(uintptr_t{4} << 16), 100, &lease).ok());
  cache.Release(lease);
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(registrar.live.count(2), 0u) << "page 2's registration should have gone";
  EXPECT_EQ(registrar.live.size(), 3u);
}

TEST(IbverbsRegistrationCache, ByteBoundEvictsAsManyAsItTakes) {
  FakeRegistrar registrar;
  RegistrationCache cache(&registrar, 16, 4 * 4096);
  RegistrationCache::Lease lease;
  for (uintptr_t page : {1, 2, 3, 4}) {
    ASSERT_TRUE(cache.Acquire(At(page << 20), 4096, &lease).ok());
    cache.Release(lease);
  }
  ASSERT_TRUE(cache.Acquire(At(uintptr_t{9} << 20), 3 * 4096, &lease).ok());
  ASSERT_TRUE(lease);
  cache.Release(lease);
  EXPECT_EQ(cache.evictions(), 3u);
  EXPECT_EQ(cache.bytes(), 4u * 4096);
  EXPECT_EQ(cache.entries(), 2u);
}

TEST(IbverbsRegistrationCache, PinnedRegistrationsStayAndWithoutRoomTheCallerCopies) {
  FakeRegistrar registrar;
  RegistrationCache cache(&registrar, 2, 1 << 20);
  RegistrationCache::Lease a, b, c;
  ASSERT_TRUE(cache.Acquire(At(1 << 16), 10, &a).ok());
  ASSERT_TRUE(cache.Acquire(At(2 << 16), 10, &b).ok());
  // Both are pinned by writes in flight: no room, no registration, an empty lease.
  ASSERT_TRUE(cache.Acquire(At(3 << 16), 10, &c).ok());
  EXPECT_FALSE(c);
  EXPECT_EQ(registrar.registered.size(), 2u);
  EXPECT_EQ(cache.evictions(), 0u);
  // Once one is released it may go.
  cache.Release(a);
  ASSERT_TRUE(cache.Acquire(At(3 << 16), 10, &c).ok());
  EXPECT_TRUE(c);
  EXPECT_EQ(registrar.live.count(a.keys.lkey), 0u);
  EXPECT_EQ(registrar.live.count(b.keys.lkey), 1u);
  // Larger than the byte bound: never registered.
  RegistrationCache small(&registrar, 4, 8192);
  RegistrationCache::Lease big;
  ASSERT_TRUE(small.Acquire(At(1 << 24), 8193, &big).ok());
  EXPECT_FALSE(big);
  cache.Release(b);
  cache.Release(c);
}

TEST(IbverbsRegistrationCache, RegistrarErrorsPassThroughAndTheCacheDeregistersAllAtTheEnd) {
  FakeRegistrar registrar;
  {
    RegistrationCache cache(&registrar, 4, 1 << 20);
    RegistrationCache::Lease lease;
    ASSERT_TRUE(cache.Acquire(At(1 << 16), 10, &lease).ok());
    cache.Release(lease);
    registrar.fail = true;
    EXPECT_TRUE(IsStatus(cache.Acquire(At(2 << 16), 10, &lease), Code::kInternal,
                         "ibverbs: ibv_reg_mr: Cannot allocate memory"));
    EXPECT_FALSE(lease);
    EXPECT_EQ(cache.entries(), 1u);
  }
  EXPECT_TRUE(registrar.live.empty());
  EXPECT_EQ(registrar.deregistered, 1);
}

// ---- the connection's steps --------------------------------------------------------------------

TEST(IbverbsConnectionState, TheConnectorOffersThenConnectsThenSaysReady) {
  ConnectionState state(Role::kConnector);
  EXPECT_FALSE(state.holds_queue_pair());
  for (ConnEvent event : {ConnEvent::kQpCreated, ConnEvent::kOfferSent, ConnEvent::kAnswerReceived,
                          ConnEvent::kToRtr, ConnEvent::kToRts}) {
    ASSERT_TRUE(state.Apply(event).ok()) << Name(event);
    EXPECT_FALSE(state.can_post()) << Name(event);
    EXPECT_TRUE(state.holds_queue_pair());
  }
  ASSERT_TRUE(state.Apply(ConnEvent::kReadySent).ok());
  EXPECT_EQ(state.state(), ConnState::kReady);
  EXPECT_TRUE(state.can_post());
  EXPECT_TRUE(state.can_read());
}

TEST(IbverbsConnectionState, TheAcceptorAnswersFromRtsAndPostsOnlyOnceTheConnectorIsReady) {
  ConnectionState state(Role::kAcceptor);
  for (ConnEvent event : {ConnEvent::kQpCreated, ConnEvent::kOfferReceived, ConnEvent::kToRtr,
                          ConnEvent::kToRts, ConnEvent::kAnswerSent}) {
    ASSERT_TRUE(state.Apply(event).ok()) << Name(event);
    EXPECT_FALSE(state.can_post()) << Name(event);
  }
  ASSERT_TRUE(state.Apply(ConnEvent::kReadyReceived).ok());
  EXPECT_TRUE(state.can_post());
}

TEST(IbverbsConnectionState, StepsOutOfOrderAreRefusedByNameAndChangeNothing) {
  ConnectionState connector(Role::kConnector);
  ASSERT_TRUE(connector.Apply(ConnEvent::kQpCreated).ok());
  // RTR needs the peer's answer first.
  EXPECT_TRUE(IsStatus(connector.Apply(ConnEvent::kToRtr), Code::kInternal,
                       "ibverbs: move to RTR while init (connector)"));
  EXPECT_EQ(connector.state(), ConnState::kInit);
  // An acceptor's step is not the connector's.
  EXPECT_TRUE(IsStatus(connector.Apply(ConnEvent::kOfferReceived), Code::kInternal,
                       "ibverbs: offer received while init (connector)"));
  ConnectionState acceptor(Role::kAcceptor);
  ASSERT_TRUE(acceptor.Apply(ConnEvent::kQpCreated).ok());
  ASSERT_TRUE(acceptor.Apply(ConnEvent::kOfferReceived).ok());
  // Answering before RTS would let the connector write into a queue pair not ready.
  EXPECT_TRUE(IsStatus(acceptor.Apply(ConnEvent::kAnswerSent), Code::kInternal,
                       "ibverbs: answer sent while offered (acceptor)"));
  EXPECT_EQ(acceptor.state(), ConnState::kOffered);
}

TEST(IbverbsConnectionState, ARefusalFallsBackAndALossDrainsAndCloseIsFinal) {
  ConnectionState refused(Role::kConnector);
  ASSERT_TRUE(refused.Apply(ConnEvent::kQpCreated).ok());
  ASSERT_TRUE(refused.Apply(ConnEvent::kOfferSent).ok());
  ASSERT_TRUE(refused.Apply(ConnEvent::kRefusalReceived).ok());
  EXPECT_EQ(refused.state(), ConnState::kFallback);
  EXPECT_FALSE(refused.can_post());
  EXPECT_TRUE(refused.holds_queue_pair());  // teardown still has one to destroy

  ConnectionState lost(Role::kAcceptor);
  for (ConnEvent event : {ConnEvent::kQpCreated, ConnEvent::kOfferReceived, ConnEvent::kToRtr,
                          ConnEvent::kToRts, ConnEvent::kAnswerSent, ConnEvent::kReadyReceived,
                          ConnEvent::kLost})
    ASSERT_TRUE(lost.Apply(event).ok()) << Name(event);
  EXPECT_EQ(lost.state(), ConnState::kDraining);
  EXPECT_FALSE(lost.can_post());
  EXPECT_TRUE(lost.can_read());  // what landed before the loss is still delivered
  ASSERT_TRUE(lost.Apply(ConnEvent::kClose).ok());
  EXPECT_FALSE(lost.holds_queue_pair());
  EXPECT_TRUE(IsStatus(lost.Apply(ConnEvent::kQpCreated), Code::kInternal,
                       "ibverbs: queue pair created while closed (acceptor)"));
  EXPECT_TRUE(lost.Apply(ConnEvent::kClose).ok());
}

// ---- the queue-pair messages -------------------------------------------------------------------

QpParams Valid(QpAnswer answer) {
  QpParams params;
  params.answer = static_cast<uint16_t>(answer);
  params.qpn = 0x123;
  params.psn = 0xabcdef;
  params.lid = 7;
  params.mtu = 5;
  params.link_layer = kLinkLayerInfiniband;
  params.gid[15] = 1;
  params.ring_addr = 0x7f0000000000;
  params.ring_rkey = 42;
  params.slots = 16;
  params.slot_bytes = 256 << 10;
  return params;
}

TEST(IbverbsQpParams, AValidOfferAndAnswerPass) {
  const QpParams mine = Valid(QpAnswer::kOffer);
  EXPECT_TRUE(CheckPeerParams(Valid(QpAnswer::kOffer), mine, QpAnswer::kOffer).ok());
  EXPECT_TRUE(CheckPeerParams(Valid(QpAnswer::kAccept), mine, QpAnswer::kAccept).ok());
  // A refusal answers an offer too; its fields are not looked at.
  QpParams refusal;
  refusal.answer = static_cast<uint16_t>(QpAnswer::kRefuse);
  SetReason(&refusal, "no RDMA device");
  EXPECT_TRUE(CheckPeerParams(refusal, mine, QpAnswer::kAccept).ok());
  EXPECT_EQ(Reason(refusal), "no RDMA device");
  SetReason(&refusal, std::string(100, 'x'));
  EXPECT_EQ(Reason(refusal), std::string(63, 'x'));
}

TEST(IbverbsQpParams, EachWayToBeWrongIsNamed) {
  const QpParams mine = Valid(QpAnswer::kOffer);
  auto check = [&](void (*spoil)(QpParams*), QpAnswer expected) {
    QpParams peer = Valid(expected == QpAnswer::kOffer ? QpAnswer::kOffer : QpAnswer::kAccept);
    spoil(&peer);
    return CheckPeerParams(peer, mine, expected);
  };
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->magic = 1; }, QpAnswer::kOffer),
                       Code::kInternal, "ibverbs: the peer's queue-pair parameters are not tutti's"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->version = 2; }, QpAnswer::kOffer),
                       Code::kVersionMismatch,
                       "ibverbs: the peer speaks queue-pair parameters version 2, this rank 1 "
                       "(mixed tutti versions?)"));
  EXPECT_TRUE(IsStatus(
      check([](QpParams* p) { p->answer = static_cast<uint16_t>(QpAnswer::kRefuse); },
            QpAnswer::kOffer),
      Code::kInternal, "ibverbs: expected an offer, the peer sent kind 3"));
  EXPECT_TRUE(IsStatus(
      check([](QpParams* p) { p->answer = static_cast<uint16_t>(QpAnswer::kOffer); },
            QpAnswer::kAccept),
      Code::kInternal, "ibverbs: expected an answer, the peer sent kind 1"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->qpn = 1u << 24; }, QpAnswer::kOffer),
                       Code::kInternal,
                       "ibverbs: the peer sent queue pair number 16777216, not a 24-bit QPN"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->qpn = 0; }, QpAnswer::kOffer), Code::kInternal,
                       "ibverbs: the peer sent queue pair number 0, not a 24-bit QPN"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->psn = 1u << 24; }, QpAnswer::kOffer),
                       Code::kInternal,
                       "ibverbs: the peer sent packet sequence number 16777216, not 24 bits"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->mtu = 6; }, QpAnswer::kOffer), Code::kInternal,
                       "ibverbs: the peer's path MTU code 6 is not one of 1-5"));
  EXPECT_TRUE(IsStatus(
      check([](QpParams* p) { p->link_layer = kLinkLayerEthernet; }, QpAnswer::kOffer),
      Code::kInternal,
      "ibverbs: the peer's port is Ethernet (RoCE), this rank's InfiniBand: they cannot reach "
      "each other"));
  EXPECT_TRUE(IsStatus(check(
                           [](QpParams* p) {
                             p->lid = 0;
                             std::memset(p->gid, 0, sizeof(p->gid));
                           },
                           QpAnswer::kOffer),
                       Code::kInternal,
                       "ibverbs: the peer's InfiniBand port has neither a LID nor a GID"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->slots = 8; }, QpAnswer::kOffer),
                       Code::kInternal,
                       "ibverbs: the peer's ring has 8 slots of 262144 bytes, this rank's 16 of "
                       "262144 (mixed tutti versions?)"));
  EXPECT_TRUE(IsStatus(check([](QpParams* p) { p->ring_addr = 0; }, QpAnswer::kOffer),
                       Code::kInternal, "ibverbs: the peer sent no ring address"));
  QpParams roce_mine = mine;
  roce_mine.link_layer = kLinkLayerEthernet;
  QpParams roce_peer = Valid(QpAnswer::kOffer);
  roce_peer.link_layer = kLinkLayerEthernet;
  std::memset(roce_peer.gid, 0, sizeof(roce_peer.gid));
  EXPECT_TRUE(IsStatus(CheckPeerParams(roce_peer, roce_mine, QpAnswer::kOffer), Code::kInternal,
                       "ibverbs: the peer's RoCE port sent no GID"));
}

}  // namespace
}  // namespace tutti::transport::ibverbs
