#include "transport/secure/sealed_channel.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tutti::transport {

namespace {
Status Tampered(uint64_t sequence) {
  return Status(Code::kAuthFailed,
                "data-plane record " + std::to_string(sequence) +
                    " failed authentication: altered, replayed, reordered or dropped on the way");
}
}  // namespace

SealedChannel::SealedChannel(std::unique_ptr<Channel> inner, std::unique_ptr<RecordCipher> sealer,
                             std::unique_ptr<RecordCipher> opener)
    : inner_(std::move(inner)),
      sealer_(std::move(sealer)),
      opener_(std::move(opener)),
      out_(kMaxRecordBytes),
      // Two records' room: a read can take the rest of one record and the start of the next.
      in_(2 * kMaxRecordBytes) {}

Status SealedChannel::TrySend(const char* data, size_t len, size_t* moved) {
  if (!failed_.ok()) return failed_;
  while (true) {
    if (out_sent_ == out_len_) {  // nothing in flight: seal the next piece of the caller's bytes
      if (len == 0) return Status::Ok();
      out_plain_ = std::min(len, kMaxRecordPayload);
      out_len_ = sealer_->Seal(data, out_plain_, out_.data());
      out_sent_ = 0;
    }
    TUTTI_RETURN_IF_ERROR(inner_->TrySend(out_.data() + out_sent_, out_len_ - out_sent_, &out_sent_));
    if (out_sent_ < out_len_) return Status::Ok();  // the socket is full; the caller waits
    // The record is in the socket: its bytes are moved.
    *moved += out_plain_;
    data += out_plain_;
    len -= out_plain_;
    out_plain_ = out_len_ = out_sent_ = 0;
  }
}

bool SealedChannel::RecordWaiting() const {
  const size_t have = in_end_ - in_start_;
  if (have < kRecordHeaderBytes) return false;
  const size_t payload = RecordCipher::PayloadLength(in_.data() + in_start_);
  // A corrupt length counts as waiting: opening it reports the failure.
  return payload == 0 || have >= kRecordHeaderBytes + payload + kRecordTagBytes;
}

Status SealedChannel::OpenWaitingRecord() {
  char* record = in_.data() + in_start_;
  const size_t payload = RecordCipher::PayloadLength(record);
  if (payload == 0 || !opener_->Open(record, payload)) return failed_ = Tampered(opener_->sequence());
  plain_ = record + kRecordHeaderBytes;
  plain_left_ = payload;
  plain_record_ = kRecordHeaderBytes + payload + kRecordTagBytes;
  return Status::Ok();
}

Status SealedChannel::TryRecv(char* data, size_t len, size_t* moved) {
  if (!failed_.ok()) return failed_;
  while (len > 0) {
    if (plain_left_ > 0) {  // hand out what an opened record holds
      const size_t n = std::min(len, plain_left_);
      std::memcpy(data, plain_, n);
      plain_ += n;
      plain_left_ -= n;
      data += n;
      len -= n;
      *moved += n;
      if (plain_left_ == 0) in_start_ += plain_record_;
      continue;
    }
    if (RecordWaiting()) {
      TUTTI_RETURN_IF_ERROR(OpenWaitingRecord());
      continue;
    }
    // Read more: first make room for a whole record after in_start_.
    if (in_start_ == in_end_) {
      in_start_ = in_end_ = 0;
    } else if (in_.size() - in_start_ < kMaxRecordBytes) {
      std::memmove(in_.data(), in_.data() + in_start_, in_end_ - in_start_);
      in_end_ -= in_start_;
      in_start_ = 0;
    }
    const size_t before = in_end_;
    TUTTI_RETURN_IF_ERROR(inner_->TryRecv(in_.data() + in_end_, in_.size() - in_end_, &in_end_));
    if (in_end_ == before) return Status::Ok();  // nothing more now; the caller waits
  }
  return Status::Ok();
}

bool SealedChannel::PrepareWait(bool send, bool recv, size_t /*need*/, std::vector<pollfd>* fds) {
  // Plaintext or a whole record already here: receiving can go on without the socket.
  if (recv && (plain_left_ > 0 || RecordWaiting())) return false;
  return inner_->PrepareWait(send, recv, 1, fds);
}

bool SealedChannel::ReadableNow() {
  return plain_left_ > 0 || RecordWaiting() || inner_->ReadableNow();
}

}  // namespace tutti::transport
