// The data-plane handshake (docs/security.md): a connection proves it belongs to the job before
// it carries a byte of tensor data. The accepting side sends a fresh random nonce; the connecting
// side answers with its hello and an HMAC-SHA256, keyed with the job's secret (handed to every
// rank in tuttid's Welcome), over the nonce and the hello's fields. A recorded hello is useless
// on a later connection, whose nonce differs; a process outside the job cannot compute one.
// libsodium does the cryptography. Thread-safe: plain functions over their arguments.
//
// Versioning: each message starts with a magic that names its layout and meaning. A backend that
// needs more than the socket (ibverbs: queue pair numbers and memory keys) names itself with its
// own hello magic and then exchanges signed parameters on the same connection (SignParams), each
// MAC bound to this connection's nonce and to its direction, so that neither side's parameters
// can be replayed from another connection or reflected back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti::transport {

constexpr size_t kJobSecretBytes = 32;

// Accepting side -> connecting side, first thing on every connection.
struct Challenge {
  uint32_t magic;
  uint8_t nonce[16];
};
constexpr uint32_t kChallengeMagic = 0x48435454;  // "TTCH"

// Connecting side -> accepting side, in answer.
struct Hello {
  uint32_t magic;
  int32_t set_id;     // or a negative point-to-point channel
  int32_t from_rank;  // the connecting rank
  int32_t to_rank;    // the rank it means to reach
  uint8_t mac[32];    // HMAC-SHA256(job secret, context || nonce || the four fields above)
};
constexpr uint32_t kHelloMagic = 0x50435454;  // "TTCP"
// The hello of a connection through the TCP listener that bootstraps an ibverbs channel
// (transport/ibverbs/): the acceptor parks it as that backend's, not TCP's. Its MAC also covers
// the magic, so that a hello signed for one backend cannot pose as the other's.
constexpr uint32_t kIbverbsHelloMagic = 0x42495454;  // "TTIB"

// Whether `magic` starts a hello this version understands.
inline bool KnownHelloMagic(uint32_t magic) {
  return magic == kHelloMagic || magic == kIbverbsHelloMagic;
}

Challenge NewChallenge();
// Fills `hello->mac`; the other fields must be set.
void SignHello(const std::string& secret, const Challenge& challenge, Hello* hello);
// Whether `hello` answers `challenge` under `secret` (compared in constant time).
bool VerifyHello(const std::string& secret, const Challenge& challenge, const Hello& hello);

// A backend's parameters sent after the hello on the same connection, from rank `from` to rank
// `to`: HMAC-SHA256(job secret, "tutti data-plane params v1" || nonce || from || to || params).
// The nonce is the connection's challenge, which both sides know; `from`/`to` give the direction.
constexpr size_t kParamsMacBytes = 32;
void SignParams(const std::string& secret, const Challenge& challenge, int32_t from, int32_t to,
                const void* params, size_t len, uint8_t mac[kParamsMacBytes]);
bool VerifyParams(const std::string& secret, const Challenge& challenge, int32_t from, int32_t to,
                  const void* params, size_t len, const uint8_t mac[kParamsMacBytes]);

// A fresh job secret (kJobSecretBytes random bytes), for tuttid.
std::string NewJobSecret();

}  // namespace tutti::transport
