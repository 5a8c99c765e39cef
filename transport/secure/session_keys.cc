#include "transport/secure/session_keys.h"

#include <sodium.h>

#include <stdexcept>

namespace tutti::transport {
namespace {
constexpr char kContext[] = "tutti data-plane session keys v1";
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "tuttidp1";
static_assert(crypto_kdf_KEYBYTES == kRecordKeyBytes);
}  // namespace

SessionKeys::~SessionKeys() {
  sodium_memzero(connector_to_acceptor, sizeof(connector_to_acceptor));
  sodium_memzero(acceptor_to_connector, sizeof(acceptor_to_connector));
}

SessionKeys DeriveSessionKeys(const std::string& secret, const uint8_t acceptor_nonce[16],
                              const uint8_t connector_nonce[16], int32_t channel,
                              int32_t connector, int32_t acceptor, DataSecurity security,
                              RecordAead aead) {
  if (sodium_init() < 0) throw std::runtime_error("libsodium cannot initialize");
  uint8_t master[crypto_kdf_KEYBYTES];
  crypto_generichash_state state;
  crypto_generichash_init(&state, reinterpret_cast<const uint8_t*>(secret.data()), secret.size(),
                          sizeof(master));
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(kContext), sizeof(kContext));
  crypto_generichash_update(&state, acceptor_nonce, 16);
  crypto_generichash_update(&state, connector_nonce, 16);
  const uint32_t fields[] = {static_cast<uint32_t>(channel), static_cast<uint32_t>(connector),
                             static_cast<uint32_t>(acceptor), static_cast<uint32_t>(security),
                             static_cast<uint32_t>(aead)};
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(fields), sizeof(fields));
  crypto_generichash_final(&state, master, sizeof(master));
  SessionKeys keys;
  crypto_kdf_derive_from_key(keys.connector_to_acceptor, kRecordKeyBytes, 1, kKdfContext, master);
  crypto_kdf_derive_from_key(keys.acceptor_to_connector, kRecordKeyBytes, 2, kKdfContext, master);
  sodium_memzero(master, sizeof(master));
  return keys;
}

}  // namespace tutti::transport
