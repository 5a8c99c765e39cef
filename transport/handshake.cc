#include "transport/handshake.h"

#include <sodium.h>

#include <cstring>
#include <stdexcept>

namespace tutti::transport {
namespace {

// Domain separation: this MAC can never be confused with one computed for another purpose.
constexpr char kContext[] = "tutti data-plane hello v1";

void EnsureSodium() {
  // Thread-safe and idempotent; fails only if the system has no randomness source.
  if (sodium_init() < 0) throw std::runtime_error("libsodium cannot initialize");
}

void Mac(const std::string& secret, const Challenge& challenge, const Hello& hello,
         uint8_t out[crypto_auth_hmacsha256_BYTES]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const uint8_t*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(kContext),
                                sizeof(kContext));
  crypto_auth_hmacsha256_update(&state, challenge.nonce, sizeof(challenge.nonce));
  const int32_t fields[] = {hello.set_id, hello.from_rank, hello.to_rank};
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(fields), sizeof(fields));
  crypto_auth_hmacsha256_final(&state, out);
}

static_assert(sizeof(Hello::mac) == crypto_auth_hmacsha256_BYTES);

}  // namespace

Challenge NewChallenge() {
  EnsureSodium();
  Challenge challenge{kChallengeMagic, {}};
  randombytes_buf(challenge.nonce, sizeof(challenge.nonce));
  return challenge;
}

void SignHello(const std::string& secret, const Challenge& challenge, Hello* hello) {
  EnsureSodium();
  Mac(secret, challenge, *hello, hello->mac);
}

bool VerifyHello(const std::string& secret, const Challenge& challenge, const Hello& hello) {
  if (secret.empty() || hello.magic != kHelloMagic) return false;
  EnsureSodium();
  uint8_t expected[crypto_auth_hmacsha256_BYTES];
  Mac(secret, challenge, hello, expected);
  return sodium_memcmp(expected, hello.mac, sizeof(expected)) == 0;
}

std::string NewJobSecret() {
  EnsureSodium();
  std::string secret(kJobSecretBytes, '\0');
  randombytes_buf(secret.data(), secret.size());
  return secret;
}

}  // namespace tutti::transport
