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
// Records of 128 KiB: big enough that the per-record cost (a nonce set-up, a tag, 20 bytes, a
// system call) is small, small enough to stay in the cache between sealing and the socket's copy.
constexpr size_t kMaxRecordPayload = 128 * 1024;
constexpr size_t kMaxRecordBytes = kRecordHeaderBytes + kMaxRecordPayload + kRecordTagBytes;

// The AEAD that seals `mode`'s records fastest on this CPU, measured once per process and mode
// (about 5 ms, at the first protected connection): ChaCha20-Poly1305, or AES-256-GCM where the CPU has AES-NI and it wins. Which
// wins depends on the CPU and on OpenSSL's code for it (on the EPYC of docs/security.md,
// ChaCha20-Poly1305 encrypts at 3.6 GB/s to AES-GCM's 3.0, and authenticates at 12 to 6.5).
// Thread-safe.
RecordAead FastestAead(DataSecurity mode);

class RecordCipher {
 public:
  // `mode` is integrity or encrypt; `key` is this direction's (transport/secure/session_keys.h).
  // Fails (kInternal) only if OpenSSL lacks the cipher.
  static Status Create(DataSecurity mode, RecordAead aead, const uint8_t key[kRecordKeyBytes],
                       std::unique_ptr<RecordCipher>* cipher);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Seals the record of `payload` (1..kMaxRecordPayload bytes): fills `header` and `tag`; in
  // encrypt mode writes the ciphertext to `out` (as long as the payload, not overlapping it), in
  // integrity mode leaves `out` alone: the payload itself is the record's body. Advances the
  // sequence number.
  void Seal(const char* payload, size_t len, char header[kRecordHeaderBytes], char* out,
            uint8_t tag[kRecordTagBytes]);
  // The same into one buffer with room for kMaxRecordBytes: header, body, tag. Returns its size.
  size_t Seal(const char* payload, size_t len, char* record);

  // The payload length a record header announces, or 0 if it is out of bounds (then the stream
  // is corrupt: fail as Open would).
  static size_t PayloadLength(const char* header);

  // Opens a record: `body` holds its `len` bytes as received and becomes the plaintext, in place.
  // False if the tag does not match this sequence number: then nothing of it may be used.
  // Advances the sequence number on success.
  bool Open(const char header[kRecordHeaderBytes], char* body, size_t len,
            const uint8_t tag[kRecordTagBytes]);
  // The same for a whole record in one buffer (header, body, tag).
  bool Open(char* record, size_t payload_len);

  bool encrypts() const { return mode_ == DataSecurity::kEncrypt; }
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
