// One peer pair's byte pipe in both directions, as a backend provides it. A SocketContext drives
// its channels without blocking in them: it tries to move bytes, and when none moved it asks the
// channels what to poll for, so one SendRecv can progress a TCP peer and a shared-memory peer at
// once. Owned and used by one lane thread.
#pragma once

#include <poll.h>

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"

namespace tutti::transport {

class Channel {
 public:
  virtual ~Channel() = default;

  virtual Link link() const = 0;

  // Move what can be moved now, at most `len` bytes, and add it to `*moved`. Errors are
  // kPeerLost with the reason alone ("connection closed", "send: Broken pipe"); the context names
  // the peer.
  virtual Status TrySend(const char* data, size_t len, size_t* moved) = 0;
  virtual Status TryRecv(char* data, size_t len, size_t* moved) = 0;

  // Worth retrying a few times before sleeping: moving bytes costs no system call.
  virtual bool spins() const { return false; }

  // About to sleep until this channel can send (`send`) or receive (`recv`) at least `need`
  // bytes: appends the fds to poll. Returns false instead when that became possible meanwhile
  // (do not sleep).
  virtual bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) = 0;
  // The sleep ended: `fds` are the entries this channel appended, with their revents.
  virtual void FinishWait(const pollfd* fds) = 0;
  // Bytes can be received now. Does not block; a closed peer shows in peer_gone() afterwards.
  virtual bool ReadableNow() = 0;

  // A new message starts in that direction: the bytes of one SendRecv or Relay. Both sides of a
  // pair see the same message boundaries, so a backend may align each message's start.
  virtual void BeginSend() {}
  virtual void BeginRecv() {}

  // Zero-copy access, for backends whose bytes in flight sit in memory both sides map
  // (Context::Relay). ReadWindow: the contiguous bytes readable now, and in `*total` all that
  // are; Consume(n) releases them. WriteWindow/Produce likewise for room toward the peer.
  virtual bool has_windows() const { return false; }
  virtual size_t ReadWindow(const char** /*window*/, size_t* total) { return *total = 0; }
  virtual void Consume(size_t /*n*/) {}
  virtual size_t WriteWindow(char** /*window*/, size_t* total) { return *total = 0; }
  virtual void Produce(size_t /*n*/) {}
  // The peer closed its end (then nothing more will arrive).
  virtual bool peer_gone() const { return false; }
};

}  // namespace tutti::transport
