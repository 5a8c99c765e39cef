#include "transport/secure/record_cipher.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace tutti::transport {
namespace {

constexpr size_t kNonceBytes = 12;  // both AEADs' standard nonce

void PutLength(uint32_t len, char* header) {
  const uint8_t bytes[4] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8),
                            static_cast<uint8_t>(len >> 16), static_cast<uint8_t>(len >> 24)};
  std::memcpy(header, bytes, 4);
}

}  // namespace

namespace {

// Seconds to seal 1 MiB in records of kMaxRecordPayload with `cipher`.
double SealTime(RecordCipher& cipher) {
  static const std::vector<char> payload(1 << 20, 1);
  std::vector<char> record(kMaxRecordBytes);
  const auto start = std::chrono::steady_clock::now();
  for (size_t off = 0; off < payload.size(); off += kMaxRecordPayload)
    cipher.Seal(payload.data() + off, kMaxRecordPayload, record.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

RecordAead Measure(DataSecurity mode) {
  if (!CpuHasAesGcm()) return RecordAead::kChaCha20Poly1305;  // software AES: slow, not constant-time
  const uint8_t key[kRecordKeyBytes] = {1};
  std::unique_ptr<RecordCipher> aes, chacha;
  if (!RecordCipher::Create(mode, RecordAead::kAes256Gcm, key, &aes).ok())
    return RecordAead::kChaCha20Poly1305;
  if (!RecordCipher::Create(mode, RecordAead::kChaCha20Poly1305, key, &chacha).ok())
    return RecordAead::kAes256Gcm;
  // Alternating, best of 7 each after a warm-up: the clock ramping up or a neighbour's burst
  // must not decide (about 5 ms in all).
  double aes_best = 1e9, chacha_best = 1e9;
  SealTime(*aes);
  SealTime(*chacha);
  for (int attempt = 0; attempt < 7; ++attempt) {
    aes_best = std::min(aes_best, SealTime(*aes));
    chacha_best = std::min(chacha_best, SealTime(*chacha));
  }
  return aes_best < chacha_best ? RecordAead::kAes256Gcm : RecordAead::kChaCha20Poly1305;
}

}  // namespace

RecordAead FastestAead(DataSecurity mode) {
  if (mode == DataSecurity::kOff) return RecordAead::kNone;
  static const RecordAead integrity = Measure(DataSecurity::kIntegrity);
  static const RecordAead encrypt = Measure(DataSecurity::kEncrypt);
  return mode == DataSecurity::kIntegrity ? integrity : encrypt;
}

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

void RecordCipher::Seal(const char* payload, size_t len, char header[kRecordHeaderBytes],
                        char* out, uint8_t tag[kRecordTagBytes]) {
  PutLength(static_cast<uint32_t>(len), header);
  const auto* in = reinterpret_cast<const unsigned char*>(payload);
  int n = 0;
  bool ok = Start(/*seal=*/true) &&
            EVP_CipherUpdate(ctx_, nullptr, &n, reinterpret_cast<const unsigned char*>(header),
                             kRecordHeaderBytes) == 1;
  if (mode_ == DataSecurity::kEncrypt)
    ok = ok && EVP_CipherUpdate(ctx_, reinterpret_cast<unsigned char*>(out), &n, in,
                                static_cast<int>(len)) == 1;
  else  // integrity: the payload travels as it is, authenticated as associated data
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &n, in, static_cast<int>(len)) == 1;
  unsigned char end[16];
  ok = ok && EVP_CipherFinal_ex(ctx_, end, &n) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, kRecordTagBytes, tag) == 1;
  // OpenSSL fails here only on a broken context; a record sent with a wrong tag then fails at the
  // receiver, never as wrong data.
  if (!ok) std::memset(tag, 0, kRecordTagBytes);
  ++sequence_;
}

size_t RecordCipher::Seal(const char* payload, size_t len, char* record) {
  char* body = record + kRecordHeaderBytes;
  if (mode_ == DataSecurity::kEncrypt) {
    Seal(payload, len, record, body, reinterpret_cast<uint8_t*>(body + len));
  } else {
    std::memcpy(body, payload, len);
    Seal(body, len, record, nullptr, reinterpret_cast<uint8_t*>(body + len));
  }
  return kRecordHeaderBytes + len + kRecordTagBytes;
}

bool RecordCipher::Open(const char header[kRecordHeaderBytes], char* body, size_t len,
                        const uint8_t tag[kRecordTagBytes]) {
  auto* bytes = reinterpret_cast<unsigned char*>(body);
  int n = 0;
  bool ok = Start(/*seal=*/false) &&
            EVP_CipherUpdate(ctx_, nullptr, &n, reinterpret_cast<const unsigned char*>(header),
                             kRecordHeaderBytes) == 1;
  if (mode_ == DataSecurity::kEncrypt)
    ok = ok && EVP_CipherUpdate(ctx_, bytes, &n, bytes, static_cast<int>(len)) == 1;
  else
    ok = ok && EVP_CipherUpdate(ctx_, nullptr, &n, bytes, static_cast<int>(len)) == 1;
  unsigned char expected[kRecordTagBytes], end[16];
  std::memcpy(expected, tag, kRecordTagBytes);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, kRecordTagBytes, expected) == 1 &&
       EVP_CipherFinal_ex(ctx_, end, &n) == 1;
  if (ok) ++sequence_;
  return ok;
}

bool RecordCipher::Open(char* record, size_t len) {
  char* body = record + kRecordHeaderBytes;
  return Open(record, body, len, reinterpret_cast<const uint8_t*>(body + len));
}

}  // namespace tutti::transport
