#include "transport/secure/data_security.h"

#include <sodium.h>

namespace tutti::transport {

const char* DataSecurityName(DataSecurity security) {
  switch (security) {
    case DataSecurity::kOff: return "off";
    case DataSecurity::kIntegrity: return "integrity";
    case DataSecurity::kEncrypt: return "encrypt";
  }
  return "?";
}

bool ParseDataSecurity(const std::string& name, DataSecurity* security) {
  for (DataSecurity s : {DataSecurity::kOff, DataSecurity::kIntegrity, DataSecurity::kEncrypt})
    if (name == DataSecurityName(s)) {
      *security = s;
      return true;
    }
  return false;
}

const char* RecordAeadName(RecordAead aead) {
  switch (aead) {
    case RecordAead::kNone: return "none";
    case RecordAead::kAes256Gcm: return "AES-256-GCM";
    case RecordAead::kChaCha20Poly1305: return "ChaCha20-Poly1305";
  }
  return "?";
}

bool CpuHasAesGcm() {
  // libsodium's CPU probe: AES-NI and PCLMULQDQ, which OpenSSL's fast GCM needs too.
  static const bool has = sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() == 1;
  return has;
}

}  // namespace tutti::transport
