// A channel whose bytes travel in sealed records (transport/secure/record_cipher.h): wraps the
// byte pipe of another channel (TCP's) and keeps its non-blocking contract. Bytes handed to
// TrySend count as moved only once the record holding them is entirely in the socket, so a
// SendRecv that returns has nothing left in this channel; bytes come out of TryRecv only after
// their record's tag matched, so an altered, replayed, reordered or dropped record is never
// used: TryRecv fails with kAuthFailed, and so does every later call.
// Owned and used by one lane thread, like the channel it wraps.
#pragma once

#include <memory>
#include <vector>

#include "transport/channel.h"
#include "transport/secure/record_cipher.h"

namespace tutti::transport {

class SealedChannel : public Channel {
 public:
  SealedChannel(std::unique_ptr<Channel> inner, std::unique_ptr<RecordCipher> sealer,
                std::unique_ptr<RecordCipher> opener);

  Link link() const override { return inner_->link(); }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd* fds) override { inner_->FinishWait(fds); }
  bool ReadableNow() override;
  bool peer_gone() const override { return inner_->peer_gone(); }

 private:
  // Whether a whole record waits in the inbound buffer.
  bool RecordWaiting() const;
  // Opens the record at the start of the inbound buffer; its plaintext becomes `plain_`.
  Status OpenWaitingRecord();

  std::unique_ptr<Channel> inner_;
  std::unique_ptr<RecordCipher> sealer_, opener_;
  Status failed_;  // once a record failed to open, or the stream is corrupt

  // Outbound: one sealed record being sent, covering `out_plain_` bytes of the caller's data.
  std::vector<char> out_;
  size_t out_len_ = 0, out_sent_ = 0, out_plain_ = 0;

  // Inbound: bytes read from the socket at [in_start_, in_end_); the opened plaintext of the
  // record at in_start_ is [plain_, plain_ + plain_left_) inside it.
  std::vector<char> in_;
  size_t in_start_ = 0, in_end_ = 0;
  char* plain_ = nullptr;
  size_t plain_left_ = 0, plain_record_ = 0;  // plain_record_: the opened record's whole size
};

}  // namespace tutti::transport
