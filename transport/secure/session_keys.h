// The keys of one protected connection (docs/security.md, "The data plane"): derived from the
// job's secret and both nonces of the connection's handshake (the acceptor's challenge and the
// connector's hello), so every connection, and each of its two directions, has keys of its own,
// and no key is ever sent. libsodium does the derivation: a keyed BLAKE2b of the handshake gives
// the connection's master key, and crypto_kdf derives one subkey per direction from it.
// Thread-safe: a plain function.
#pragma once

#include <cstdint>
#include <string>

#include "transport/secure/record_cipher.h"

namespace tutti::transport {

struct SessionKeys {
  SessionKeys() = default;
  SessionKeys(const SessionKeys&) = default;
  SessionKeys& operator=(const SessionKeys&) = default;
  ~SessionKeys();  // wipes both keys: once the ciphers hold them, no other copy stays in memory
  uint8_t connector_to_acceptor[kRecordKeyBytes];
  uint8_t acceptor_to_connector[kRecordKeyBytes];
};

// `channel`, `connector`, `acceptor`: the set (or point-to-point channel) and ranks the hello
// named; `security` and `aead` as agreed, so that keys for one setting never serve another.
SessionKeys DeriveSessionKeys(const std::string& secret, const uint8_t acceptor_nonce[16],
                              const uint8_t connector_nonce[16], int32_t channel,
                              int32_t connector, int32_t acceptor, DataSecurity security,
                              RecordAead aead);

}  // namespace tutti::transport
