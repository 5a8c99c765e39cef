// One direction of a protected connection: seals the records one side sends, or opens those the
// other side receives (docs/security.md, "The data plane").
//
// A record on the wire: a 4-byte little-endian payload length L (1..kMaxRecordPayload), L payload
// bytes, a 16-byte tag. The tag covers the length and the payload (in integrity mode the payload
// is authenticated in the clear, in encrypt mode it is the ciphertext) under this direction's key,
// with the record's sequence number as the nonce: 0, 1, 2, ... never sent, counted by both ends.
// So a record altered, replayed, reordered or dropped on the path fails to open at the receiver,
// and each direction has its own key, so a record reflected back fails too.
//
// Owned and used by one thread (the channel's or stream's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "transport/secure/data_security.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace tutti::transport {

constexpr size_t kRecordKeyBytes = 32;
constexpr size_t kRecordHeaderBytes = 4;
constexpr size_t kRecordTagBytes = 16;
// Records of 64 KiB: big enough that the per-record cost (a nonce set-up, a tag, 20 bytes) is
// small, small enough to stay in the cache between sealing and the socket's copy.
constexpr size_t kMaxRecordPayload = 64 * 1024;
constexpr size_t kMaxRecordBytes = kRecordHeaderBytes + kMaxRecordPayload + kRecordTagBytes;

class RecordCipher {
 public:
  // `mode` is integrity or encrypt; `key` is this direction's (transport/secure/session_keys.h).
  // Fails (kInternal) only if OpenSSL lacks the cipher.
  static Status Create(DataSecurity mode, RecordAead aead, const uint8_t key[kRecordKeyBytes],
                       std::unique_ptr<RecordCipher>* cipher);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Writes the record of `payload` (1..kMaxRecordPayload bytes) to `record`, which has room for
  // kMaxRecordBytes; returns its size. Advances the sequence number.
  size_t Seal(const char* payload, size_t len, char* record);

  // The payload length a record header announces, or 0 if it is out of bounds (then the stream
  // is corrupt: fail as Open would).
  static size_t PayloadLength(const char* header);

  // Opens the whole record at `record` (header, payload, tag) in place: on success the payload
  // bytes at record + kRecordHeaderBytes are the plaintext. False if the tag does not match this
  // sequence number (then nothing of it may be used). Advances the sequence number on success.
  bool Open(char* record, size_t payload_len);

  // The sequence number of the next record.
  uint64_t sequence() const { return sequence_; }

 private:
  RecordCipher(DataSecurity mode, EVP_CIPHER_CTX* ctx) : mode_(mode), ctx_(ctx) {}
  // Sets this record's nonce and direction; the key schedule stays.
  bool Start(bool seal);

  const DataSecurity mode_;
  EVP_CIPHER_CTX* ctx_;
  uint64_t sequence_ = 0;
};

}  // namespace tutti::transport
