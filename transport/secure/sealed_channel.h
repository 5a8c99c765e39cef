// A TCP connection's channel whose bytes travel in sealed records (transport/secure/
// record_cipher.h), keeping the non-blocking contract of transport/channel.h. Bytes handed to
// TrySend count as moved only once the record holding them is entirely in the socket, so a
// SendRecv that returns has nothing left in this channel; bytes come out of TryRecv only after
// their record's tag matched, so an altered, replayed, reordered or dropped record is never
// used: TryRecv fails with kAuthFailed, and so does every later call. What of such a record was
// received into the caller's buffer is zeroed there.
//
// Copies: in integrity mode a record goes out straight from the caller's buffer (sendmsg of
// header, payload, tag), in encrypt mode from the ciphertext it was sealed into. A record that
// fits what the caller still expects is received straight into the caller's buffer and opened
// there (recvmsg of the rest of the body, its tag and the next header); one that does not (a
// caller reading in smaller pieces than were sent) goes through a staging buffer.
// Owned and used by one lane thread.
#pragma once

#include <memory>
#include <vector>

#include "transport/channel.h"
#include "transport/fd_io.h"
#include "transport/secure/record_cipher.h"

namespace tutti::transport {

class SealedChannel : public Channel {
 public:
  SealedChannel(UniqueFd fd, std::unique_ptr<RecordCipher> sealer,
                std::unique_ptr<RecordCipher> opener);

  Link link() const override { return Link::kTcp; }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd*) override {}
  bool ReadableNow() override;
  bool peer_gone() const override { return closed_; }

 private:
  // Reads what the socket has into the current record's parts; sets `*got` if anything came.
  Status ReadRecordParts(char* data, size_t len, bool* got);
  // The current record is whole: opens it; a direct one counts as moved, a staged one waits to be
  // handed out.
  Status FinishRecord(char* data, size_t* moved);
  // The channel fails in the middle of a record received into the caller's buffer: zeroes what
  // arrived of its body there, so that bytes no tag vouched for (the attacker's, in integrity
  // mode) do not stay in the application's tensor.
  void WipeUnopened(char* data);
  bool RecordWhole() const {
    return head_ == kRecordHeaderBytes && body_ == payload_ && tag_ == kRecordTagBytes;
  }

  UniqueFd fd_;
  std::unique_ptr<RecordCipher> sealer_, opener_;
  Status failed_;  // once a record failed to open, or the stream is corrupt
  bool closed_ = false;

  // Outbound: the record being sent, covering `out_plain_` bytes of the caller's data, of which
  // `out_sent_` bytes of `out_total_` are in the socket. Encrypt mode: the body is in `cipher_`.
  char out_header_[kRecordHeaderBytes];
  uint8_t out_tag_[kRecordTagBytes];
  std::vector<char> cipher_;
  size_t out_plain_ = 0, out_sent_ = 0, out_total_ = 0;

  // Inbound: the header of the record being received (`head_` bytes of it so far), then its body
  // (`body_` bytes, into the caller's buffer when `direct_`, else into `staged_`), then its tag.
  char in_header_[kRecordHeaderBytes];
  uint8_t in_tag_[kRecordTagBytes];
  size_t head_ = 0, body_ = 0, tag_ = 0, payload_ = 0;
  char next_header_[kRecordHeaderBytes];  // what arrived of the following record's header
  size_t next_head_ = 0;
  bool direct_ = false;
  std::vector<char> staged_;
  // Opened plaintext of a staged record not yet handed out: [plain_, plain_ + plain_left_).
  size_t plain_ = 0, plain_left_ = 0;
};

}  // namespace tutti::transport
