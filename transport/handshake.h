// The data-plane handshake (docs/security.md): a connection proves it belongs to the job before
// it carries a byte of tensor data. The accepting side sends a fresh random nonce; the connecting
// side answers with its hello and an HMAC-SHA256, keyed with the job's secret (handed to every
// rank in tuttid's Welcome), over the nonce and the hello's fields. A recorded hello is useless
// on a later connection, whose nonce differs; a process outside the job cannot compute one.
// libsodium does the cryptography. Thread-safe: plain functions over their arguments.
#pragma once

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

Challenge NewChallenge();
// Fills `hello->mac`; the other fields must be set.
void SignHello(const std::string& secret, const Challenge& challenge, Hello* hello);
// Whether `hello` answers `challenge` under `secret` (compared in constant time).
bool VerifyHello(const std::string& secret, const Challenge& challenge, const Hello& hello);

// A fresh job secret (kJobSecretBytes random bytes), for tuttid.
std::string NewJobSecret();

}  // namespace tutti::transport
