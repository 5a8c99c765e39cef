#include "transport/handshake.h"

#include <sodium.h>

#include <cstring>
#include <stdexcept>

namespace tutti::transport {
namespace {

// Domain separation: these MACs can never be confused with one computed for another purpose.
constexpr char kContext[] = "tutti data-plane hello v1";
constexpr char kParamsContext[] = "tutti data-plane params v1";

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
  // The first hello's MAC stays what 0.2 defined; every later kind also signs its magic.
  if (hello.magic != kHelloMagic)
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(&hello.magic),
                                  sizeof(hello.magic));
  crypto_auth_hmacsha256_final(&state, out);
}

void ParamsMac(const std::string& secret, const Challenge& challenge, int32_t from, int32_t to,
               const void* params, size_t len, uint8_t out[crypto_auth_hmacsha256_BYTES]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const uint8_t*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(kParamsContext),
                                sizeof(kParamsContext));
  crypto_auth_hmacsha256_update(&state, challenge.nonce, sizeof(challenge.nonce));
  const int32_t ranks[] = {from, to};
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(ranks), sizeof(ranks));
  crypto_auth_hmacsha256_update(&state, static_cast<const uint8_t*>(params), len);
  crypto_auth_hmacsha256_final(&state, out);
}

static_assert(kParamsMacBytes == crypto_auth_hmacsha256_BYTES);

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
  if (secret.empty() || !KnownHelloMagic(hello.magic)) return false;
  EnsureSodium();
  uint8_t expected[crypto_auth_hmacsha256_BYTES];
  Mac(secret, challenge, hello, expected);
  return sodium_memcmp(expected, hello.mac, sizeof(expected)) == 0;
}

void SignParams(const std::string& secret, const Challenge& challenge, int32_t from, int32_t to,
                const void* params, size_t len, uint8_t mac[kParamsMacBytes]) {
  EnsureSodium();
  ParamsMac(secret, challenge, from, to, params, len, mac);
}

bool VerifyParams(const std::string& secret, const Challenge& challenge, int32_t from, int32_t to,
                  const void* params, size_t len, const uint8_t mac[kParamsMacBytes]) {
  if (secret.empty()) return false;
  EnsureSodium();
  uint8_t expected[crypto_auth_hmacsha256_BYTES];
  ParamsMac(secret, challenge, from, to, params, len, expected);
  return sodium_memcmp(expected, mac, sizeof(expected)) == 0;
}

std::string NewJobSecret() {
  EnsureSodium();
  std::string secret(kJobSecretBytes, '\0');
  randombytes_buf(secret.data(), secret.size());
  return secret;
}

}  // namespace tutti::transport
