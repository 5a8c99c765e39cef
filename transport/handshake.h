// The data-plane handshake (docs/security.md): a connection proves it belongs to the job before
// it carries a byte of tensor data, in both directions.
//   1. acceptor -> connector: a Challenge, a fresh random nonce.
//   2. connector -> acceptor: its Hello (channel, ranks, its own fresh nonce, the data-security
//      setting and the cipher it seals fastest) and an HMAC-SHA256 over the challenge and all of it,
//      keyed with the job's secret (handed to every rank in tuttid's Welcome).
//   3. acceptor -> connector: its Proof, once the hello verified: the cipher it chose for the
//      records and an HMAC over the challenge, the whole hello and that choice.
// A recorded hello or proof is useless on a later connection, whose nonces differ; a process
// outside the job can compute neither. Under TUTTI_DATA_SECURITY=integrity or encrypt both ends
// then derive the connection's record keys from the secret and both nonces
// (transport/secure/session_keys.h). libsodium does the cryptography. Thread-safe: plain
// functions over their arguments.
//
// Versioning: each message starts with a magic that names its layout and meaning. A backend that
// needs more than the socket (ibverbs: queue pair numbers and memory keys) names itself with its
// own hello magic and then exchanges signed parameters on the same connection (SignParams), each
// MAC bound to this connection's nonce and to its direction, so that neither side's parameters
// can be replayed from another connection or reflected back. The ranks of one job run one
// protocol version (tuttid refuses a mix), so the layout changes with the version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/secure/data_security.h"

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
  int32_t set_id;      // or a negative point-to-point channel
  int32_t from_rank;   // the connecting rank
  int32_t to_rank;     // the rank it means to reach
  uint8_t nonce[16];   // the connector's, fresh: the session keys and the proof depend on it
  uint32_t security;   // its DataSecurity: both ends must run the same
  uint32_t aeads;      // bit (1 << RecordAead) of the cipher it seals fastest (FastestAead)
  uint8_t mac[32];     // HMAC-SHA256(job secret, context || challenge nonce || every field above)
};
constexpr uint32_t kHelloMagic = 0x32485454;  // "TTH2"
// The hello of a connection through the TCP listener that bootstraps an ibverbs channel
// (transport/ibverbs/): the acceptor parks it as that backend's, not TCP's. The MAC covers the
// magic, so that a hello signed for one backend cannot pose as the other's.
constexpr uint32_t kIbverbsHelloMagic = 0x32425454;  // "TTB2"

// Accepting side -> connecting side, once the hello verified.
struct Proof {
  uint32_t magic;
  uint32_t aead;    // the RecordAead of this connection's records (kNone when security is off)
  uint8_t mac[32];  // HMAC-SHA256(job secret, context || challenge nonce || hello || aead)
};
constexpr uint32_t kProofMagic = 0x52505454;  // "TTPR"

// What both ends know once the handshake is done.
struct Session {
  Challenge challenge{};
  Hello hello{};
  RecordAead aead = RecordAead::kNone;
};

// Whether `magic` starts a hello this version understands.
inline bool KnownHelloMagic(uint32_t magic) {
  return magic == kHelloMagic || magic == kIbverbsHelloMagic;
}

Challenge NewChallenge();
// A hello from `from` to `to` on `set_id` with a fresh nonce, this CPU's ciphers and `security`,
// signed: the answer to `challenge`.
Hello NewHello(const std::string& secret, const Challenge& challenge, uint32_t magic,
               int32_t set_id, int32_t from, int32_t to, DataSecurity security);
// Fills `hello->mac`; the other fields must be set.
void SignHello(const std::string& secret, const Challenge& challenge, Hello* hello);
// Whether `hello` answers `challenge` under `secret` (compared in constant time).
bool VerifyHello(const std::string& secret, const Challenge& challenge, const Hello& hello);

// The acceptor's proof for a verified `hello`: chooses the records' cipher, the connector's
// fastest if it is the acceptor's too, else ChaCha20-Poly1305 (kNone when security is off).
Proof NewProof(const std::string& secret, const Challenge& challenge, const Hello& hello);
// Whether `proof` answers this connection's challenge and hello under `secret`, with a cipher the
// connector offered or can run anyway.
bool VerifyProof(const std::string& secret, const Challenge& challenge, const Hello& hello,
                 const Proof& proof);

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
