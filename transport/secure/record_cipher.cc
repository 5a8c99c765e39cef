#include "transport/secure/record_cipher.h"

#include <openssl/evp.h>

#include <cstring>

namespace tutti::transport {
namespace {

constexpr size_t kNonceBytes = 12;  // both AEADs' standard nonce

void PutLength(uint32_t len, char* header) {
  const uint8_t bytes[4] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8),
                            static_cast<uint8_t>(len >> 16), static_cast<uint8_t>(len >> 24)};
  std::memcpy(header, bytes, 4);
}

}  // namespace

Status RecordCipher::Create(DataSecurity mode, RecordAead aead, const uint8_t key[kRecordKeyBytes],
                            std::unique_ptr<RecordCipher>* cipher) {
  const EVP_CIPHER* type = aead == RecordAead::kAes256Gcm          ? EVP_aes_256_gcm()
                           : aead == RecordAead::kChaCha20Poly1305 ? EVP_chacha20_poly1305()
                                                                   : nullptr;
  EVP_CIPHER_CTX* ctx = type ? EVP_CIPHER_CTX_new() : nullptr;
  // The key schedule is computed once; each record then only sets its nonce.
  if (ctx == nullptr || EVP_CipherInit_ex(ctx, type, nullptr, key, nullptr, 1) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return Status(Code::kInternal, std::string("OpenSSL cannot set up ") + RecordAeadName(aead) +
                                       " for the data plane");
  }
  cipher->reset(new RecordCipher(mode, ctx));
  return Status::Ok();
}

RecordCipher::~RecordCipher() { EVP_CIPHER_CTX_free(ctx_); }

bool RecordCipher::Start(bool seal) {
  // The nonce is the sequence number: unique per key (each connection and direction has its own
  // key), and known to both ends without sending it.
  uint8_t nonce[kNonceBytes] = {};
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(sequence_ >> (8 * i));
  return EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, nonce, seal ? 1 : 0) == 1;
}

size_t RecordCipher::PayloadLength(const char* header) {
  uint8_t bytes[4];
  std::memcpy(bytes, header, 4);
  const size_t len = bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (size_t{bytes[3]} << 24);
  return len == 0 || len > kMaxRecordPayload ? 0 : len;
}

size_t RecordCipher::Seal(const char* payload, size_t len, char* record) {
  PutLength(static_cast<uint32_t>(len), record);
  auto* body = reinterpret_cast<unsigned char*>(record + kRecordHeaderBytes);
  auto* header = reinterpret_cast<const unsigned char*>(record);
  int out = 0;
  bool ok = Start(/*seal=*/true);
  if (mode_ == DataSecurity::kEncrypt) {
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &out, header, kRecordHeaderBytes) == 1 &&
         EVP_CipherUpdate(ctx_, body, &out, reinterpret_cast<const unsigned char*>(payload),
                          static_cast<int>(len)) == 1;
  } else {
    // Integrity: the payload travels as it is, authenticated as associated data with its length.
    std::memcpy(body, payload, len);
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &out, header, kRecordHeaderBytes + len) == 1;
  }
  ok = ok && EVP_CipherFinal_ex(ctx_, body + len, &out) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, kRecordTagBytes, body + len) == 1;
  // OpenSSL fails here only on a broken context; a record sent with a wrong tag then fails at the
  // receiver, never as wrong data.
  if (!ok) std::memset(body + len, 0, kRecordTagBytes);
  ++sequence_;
  return kRecordHeaderBytes + len + kRecordTagBytes;
}

bool RecordCipher::Open(char* record, size_t len) {
  auto* header = reinterpret_cast<const unsigned char*>(record);
  auto* body = reinterpret_cast<unsigned char*>(record + kRecordHeaderBytes);
  int out = 0;
  bool ok = Start(/*seal=*/false);
  if (mode_ == DataSecurity::kEncrypt) {
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &out, header, kRecordHeaderBytes) == 1 &&
         EVP_CipherUpdate(ctx_, body, &out, body, static_cast<int>(len)) == 1;
  } else {
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &out, header, kRecordHeaderBytes + len) == 1;
  }
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, kRecordTagBytes, body + len) == 1 &&
       EVP_CipherFinal_ex(ctx_, body + len, &out) == 1;
  if (ok) ++sequence_;
  return ok;
}

}  // namespace tutti::transport
