#include "transport/handshake.h"

#include <sodium.h>

#include <cstddef>

#include "transport/secure/record_cipher.h"
#include <cstring>
#include <stdexcept>

namespace tutti::transport {
namespace {

// Domain separation: these MACs can never be confused with one computed for another purpose.
constexpr char kContext[] = "tutti data-plane hello v2";
constexpr char kProofContext[] = "tutti data-plane acceptor proof v1";
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
  // Every field before the MAC, the magic included (a hello signed for one backend cannot pose
  // as another's); the struct has no padding.
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(&hello),
                                offsetof(Hello, mac));
  crypto_auth_hmacsha256_final(&state, out);
}

void ProofMac(const std::string& secret, const Challenge& challenge, const Hello& hello,
              uint32_t aead, uint8_t out[crypto_auth_hmacsha256_BYTES]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const uint8_t*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(kProofContext),
                                sizeof(kProofContext));
  crypto_auth_hmacsha256_update(&state, challenge.nonce, sizeof(challenge.nonce));
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(&hello), sizeof(hello));
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const uint8_t*>(&aead), sizeof(aead));
  crypto_auth_hmacsha256_final(&state, out);
}

uint32_t AeadBit(RecordAead aead) { return 1u << static_cast<uint32_t>(aead); }

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
static_assert(sizeof(Hello) == offsetof(Hello, mac) + sizeof(Hello::mac), "Hello has no padding");
static_assert(sizeof(Proof::mac) == crypto_auth_hmacsha256_BYTES);

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

Hello NewHello(const std::string& secret, const Challenge& challenge, uint32_t magic,
               int32_t set_id, int32_t from, int32_t to, DataSecurity security) {
  EnsureSodium();
  Hello hello{magic, set_id, from, to, {}, static_cast<uint32_t>(security), 0, {}};
  randombytes_buf(hello.nonce, sizeof(hello.nonce));
  if (security != DataSecurity::kOff) hello.aeads = AeadBit(FastestAead(security));
  Mac(secret, challenge, hello, hello.mac);
  return hello;
}

Proof NewProof(const std::string& secret, const Challenge& challenge, const Hello& hello) {
  EnsureSodium();
  RecordAead aead = RecordAead::kNone;
  const auto security = static_cast<DataSecurity>(hello.security);
  if (security != DataSecurity::kOff) {
    // The connector's fastest if it is ours too; else ChaCha20-Poly1305, fast in software on
    // either end (AES-GCM is slow without AES instructions).
    const RecordAead mine = FastestAead(security);
    aead = (hello.aeads & AeadBit(mine)) ? mine : RecordAead::kChaCha20Poly1305;
  }
  Proof proof{kProofMagic, static_cast<uint32_t>(aead), {}};
  ProofMac(secret, challenge, hello, proof.aead, proof.mac);
  return proof;
}

bool VerifyProof(const std::string& secret, const Challenge& challenge, const Hello& hello,
                 const Proof& proof) {
  if (secret.empty() || proof.magic != kProofMagic) return false;
  const bool off = hello.security == static_cast<uint32_t>(DataSecurity::kOff);
  const auto aead = static_cast<RecordAead>(proof.aead);
  const bool acceptable = off ? aead == RecordAead::kNone
                              : aead == RecordAead::kChaCha20Poly1305 ||
                                    (aead == RecordAead::kAes256Gcm && (hello.aeads & AeadBit(aead)));
  if (!acceptable) return false;
  EnsureSodium();
  uint8_t expected[crypto_auth_hmacsha256_BYTES];
  ProofMac(secret, challenge, hello, proof.aead, expected);
  return sodium_memcmp(expected, proof.mac, sizeof(expected)) == 0;
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
