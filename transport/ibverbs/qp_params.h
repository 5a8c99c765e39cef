// What the two sides of an ibverbs pair tell each other over the bootstrap connection, after the
// hello (docs/wire-protocol.md, "Data plane handshake"): each side's queue pair number, packet
// sequence number, LID and GID, path MTU, and its receive ring's address, key and shape. Every
// message carries an HMAC under the job's secret bound to the connection's nonce and to its
// direction (transport/handshake.h: SignParams), so a process outside the job can neither offer
// nor answer, and a recorded exchange is useless on another connection. Unlike the hello alone,
// this also proves the accepting side: its answer is signed too.
//
// No verbs here: the layout, the checks every received message passes, and the socket exchange
// are unit-tested without a device (tests/unit/ibverbs_logic_test.cc, tests/device/).
// Thread-safe: plain functions over their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "transport/handshake.h"
#include "transport/transport.h"

namespace tutti::transport {
class SocketDevice;
}

namespace tutti::transport::ibverbs {

constexpr uint32_t kQpParamsMagic = 0x50514954;  // "TIQP"
// Bumped whenever the layout or the meaning of a field changes: a peer of another version is
// refused by name, never misread.
constexpr uint16_t kQpParamsVersion = 1;
constexpr uint32_t kReadyMagic = 0x59524954;  // "TIRY": the connector's queue pair is in RTS

enum class QpAnswer : uint16_t {
  kOffer = 1,   // connector -> acceptor: its queue pair
  kAccept = 2,  // acceptor -> connector: its queue pair, already in RTS
  kRefuse = 3,  // acceptor: no usable device here (`reason`); the pair falls back to TCP
  kFailed = 4,  // acceptor: it has a device but could not set up its side (`reason`)
};

// Link layers, as enum ibv_port_attr.link_layer numbers them (checked where verbs are in scope).
constexpr uint8_t kLinkLayerInfiniband = 1;
constexpr uint8_t kLinkLayerEthernet = 2;

// Fixed layout, in host byte order like the hello: every rank of a job runs one build on hosts
// of one byte order.
struct QpParams {
  uint32_t magic = kQpParamsMagic;
  uint16_t version = kQpParamsVersion;
  uint16_t answer = 0;     // QpAnswer
  uint32_t qpn = 0;        // 24 bits
  uint32_t psn = 0;        // 24 bits: the first packet sequence number this side sends
  uint16_t lid = 0;        // InfiniBand: the port's LID; 0 on Ethernet
  uint8_t mtu = 0;         // enum ibv_mtu of the port's active MTU (1: 256 ... 5: 4096)
  uint8_t link_layer = 0;  // kLinkLayer*
  uint8_t gid[16] = {};    // the port's chosen GID (RoCE: required; InfiniBand: for a GRH)
  uint32_t gid_index = 0;  // informational: which entry of the sender's table
  uint64_t ring_addr = 0;  // where the peer writes: `slots` slots of `slot_bytes`
  uint32_t ring_rkey = 0;
  uint32_t slots = 0;
  uint32_t slot_bytes = 0;
  uint32_t reserved = 0;
  char reason[64] = {};    // kRefuse, kFailed: why, NUL-terminated
  uint8_t mac[kParamsMacBytes] = {};  // over every byte before it
};
static_assert(sizeof(QpParams) == 160, "QpParams is a wire format");
static_assert(offsetof(QpParams, mac) == 128, "QpParams is a wire format");

// Fills `reason` from `text`, cut to fit.
void SetReason(QpParams* params, const std::string& text);

// Checks a message from the peer before any of it is used. CheckKind: its magic and version, and
// that it is the `expected` kind (an answer may also be kRefuse or kFailed). CheckPeerParams
// adds, for an offer or acceptance, that its queue pair and ring can work with `mine` (numbers
// in range, the same link layer, an address to reach it by, rings of the same shape). Errors
// name what is wrong, prefixed "ibverbs: "; kVersionMismatch for another version, else
// kInternal.
Status CheckKind(const QpParams& peer, QpAnswer expected);
Status CheckPeerParams(const QpParams& peer, const QpParams& mine, QpAnswer expected);
// A refusal's or failure's reason, as text.
std::string Reason(const QpParams& params);

// The bootstrap connection of one pair while its queue pairs are set up: the socket (borrowed),
// the challenge its hello answered, which rank is which, and the caller's bounds.
struct Bootstrap {
  SocketDevice* device = nullptr;
  int socket = -1;
  Challenge challenge{};
  int32_t self = -1;
  int32_t peer = -1;
  Deadline deadline{};
  int abort_fd = -1;
};

// Signs `*params` from self to peer and writes it.
Status SendParams(const Bootstrap& bootstrap, QpParams* params);
// Reads the peer's message and checks its MAC (from peer to self): kAuthFailed if it does not
// verify. Its content is for CheckPeerParams.
Status ReceiveParams(const Bootstrap& bootstrap, QpParams* params);
// The connector's last word of setup, and the acceptor's wait for it.
Status SendReady(const Bootstrap& bootstrap);
Status ReceiveReady(const Bootstrap& bootstrap);

}  // namespace tutti::transport::ibverbs
