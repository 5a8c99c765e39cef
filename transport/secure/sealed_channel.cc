#include "transport/secure/sealed_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace tutti::transport {

namespace {

bool Retry(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

Status Tampered(uint64_t sequence) {
  return Status(Code::kAuthFailed,
                "data-plane record " + std::to_string(sequence) +
                    " failed authentication: altered, replayed, reordered or dropped on the way");
}

// The iovec entries of `parts` from byte `skip` on, into `iov`; returns how many.
struct Part {
  char* data;
  size_t len;
};
int Tail(const Part* parts, int count, size_t skip, iovec* iov) {
  int n = 0;
  for (int i = 0; i < count; ++i) {
    if (skip >= parts[i].len) {
      skip -= parts[i].len;
      continue;
    }
    iov[n++] = {parts[i].data + skip, parts[i].len - skip};
    skip = 0;
  }
  return n;
}

}  // namespace

SealedChannel::SealedChannel(UniqueFd fd, std::unique_ptr<RecordCipher> sealer,
                             std::unique_ptr<RecordCipher> opener)
    : fd_(std::move(fd)), sealer_(std::move(sealer)), opener_(std::move(opener)) {}

Status SealedChannel::TrySend(const char* data, size_t len, size_t* moved) {
  if (!failed_.ok()) return failed_;
  while (true) {
    if (out_total_ == 0) {  // nothing in flight: seal the next piece of the caller's bytes
      if (len == 0) return Status::Ok();
      out_plain_ = std::min(len, kMaxRecordPayload);
      char* body = nullptr;
      if (sealer_->encrypts()) {
        cipher_.resize(kMaxRecordPayload);
        body = cipher_.data();
      }
      sealer_->Seal(data, out_plain_, out_header_, body, out_tag_);
      out_sent_ = 0;
      out_total_ = kRecordHeaderBytes + out_plain_ + kRecordTagBytes;
    }
    // The body goes out from the caller's buffer (integrity) or from its ciphertext (encrypt):
    // the caller passes the same bytes again until they count as moved.
    const Part parts[] = {{out_header_, kRecordHeaderBytes},
                          {sealer_->encrypts() ? cipher_.data() : const_cast<char*>(data), out_plain_},
                          {reinterpret_cast<char*>(out_tag_), kRecordTagBytes}};
    iovec iov[3];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = Tail(parts, 3, out_sent_, iov);
    const ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (Retry(errno)) return Status::Ok();  // the socket is full; the caller waits
      return Status(Code::kPeerLost, std::string("send: ") + std::strerror(errno));
    }
    out_sent_ += static_cast<size_t>(n);
    if (out_sent_ < out_total_) return Status::Ok();
    // The record is in the socket: its bytes are moved.
    *moved += out_plain_;
    data += out_plain_;
    len -= out_plain_;
    out_total_ = 0;
  }
}

Status SealedChannel::ReadRecordParts(char* data, size_t len, bool* got) {
  *got = false;
  Part parts[4];
  int count = 0;
  size_t skip = 0;
  if (head_ < kRecordHeaderBytes) {
    parts[count++] = {in_header_, kRecordHeaderBytes};
    skip = head_;
  } else {
    if (body_ == 0 && tag_ == 0) {  // the body starts: where does it go?
      direct_ = len >= payload_;
      if (!direct_ && staged_.size() < payload_) staged_.resize(kMaxRecordPayload);
    }
    parts[count++] = {direct_ ? data : staged_.data(), payload_};
    parts[count++] = {reinterpret_cast<char*>(in_tag_), kRecordTagBytes};
    parts[count++] = {next_header_, kRecordHeaderBytes};  // the next record's, if it is there
    skip = body_ + tag_ + next_head_;
  }
  iovec iov[4];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = Tail(parts, count, skip, iov);
  const ssize_t n = recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
  if (n == 0) {
    closed_ = true;
    WipeUnopened(data);
    return Status(Code::kPeerLost, "connection closed");
  }
  if (n < 0) {
    if (Retry(errno)) return Status::Ok();
    WipeUnopened(data);
    return Status(Code::kPeerLost, std::string("recv: ") + std::strerror(errno));
  }
  *got = true;
  size_t left = static_cast<size_t>(n);
  auto take = [&left](size_t* have, size_t whole) {
    const size_t k = std::min(left, whole - *have);
    *have += k;
    left -= k;
  };
  if (head_ < kRecordHeaderBytes) {
    take(&head_, kRecordHeaderBytes);
    if (head_ == kRecordHeaderBytes) {
      payload_ = RecordCipher::PayloadLength(in_header_);
      if (payload_ == 0) return failed_ = Tampered(opener_->sequence());
    }
    return Status::Ok();
  }
  take(&body_, payload_);
  take(&tag_, kRecordTagBytes);
  take(&next_head_, kRecordHeaderBytes);
  return Status::Ok();
}

void SealedChannel::WipeUnopened(char* data) {
  if (direct_ && body_ > 0) std::memset(data, 0, std::min(body_, payload_));
}

Status SealedChannel::FinishRecord(char* data, size_t* moved) {
  char* body = direct_ ? data : staged_.data();
  if (!opener_->Open(in_header_, body, payload_, in_tag_)) {
    WipeUnopened(data);
    return failed_ = Tampered(opener_->sequence());
  }
  if (direct_) {
    *moved += payload_;
  } else {
    plain_ = 0;
    plain_left_ = payload_;
  }
  // The next record starts with what arrived of its header.
  std::memcpy(in_header_, next_header_, kRecordHeaderBytes);
  head_ = next_head_;
  next_head_ = body_ = tag_ = 0;
  payload_ = head_ == kRecordHeaderBytes ? RecordCipher::PayloadLength(in_header_) : 0;
  if (head_ == kRecordHeaderBytes && payload_ == 0) return failed_ = Tampered(opener_->sequence());
  return Status::Ok();
}

Status SealedChannel::TryRecv(char* data, size_t len, size_t* moved) {
  if (!failed_.ok()) return failed_;
  while (len > 0) {
    if (plain_left_ > 0) {  // hand out what a staged record holds
      const size_t n = std::min(len, plain_left_);
      std::memcpy(data, staged_.data() + plain_, n);
      plain_ += n;
      plain_left_ -= n;
      data += n;
      len -= n;
      *moved += n;
      continue;
    }
    if (RecordWhole()) {
      const size_t before = *moved;
      TUTTI_RETURN_IF_ERROR(FinishRecord(data, moved));
      data += *moved - before;
      len -= *moved - before;
      continue;
    }
    bool got = false;
    TUTTI_RETURN_IF_ERROR(ReadRecordParts(data, len, &got));
    if (!got) return Status::Ok();  // nothing more now; the caller waits
  }
  return Status::Ok();
}

bool SealedChannel::PrepareWait(bool send, bool recv, size_t /*need*/, std::vector<pollfd>* fds) {
  // Plaintext or a whole record already here: receiving can go on without the socket.
  if (recv && (plain_left_ > 0 || RecordWhole())) return false;
  fds->push_back({fd_.get(), static_cast<short>((send ? POLLOUT : 0) | (recv ? POLLIN : 0)), 0});
  return true;
}

bool SealedChannel::ReadableNow() {
  return plain_left_ > 0 || RecordWhole() || SocketReadableNow(fd_.get(), &closed_);
}

}  // namespace tutti::transport
