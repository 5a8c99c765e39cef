// The boundary between libtutti.so and a library that carries the data plane's bytes as messages
// (docs/transports.md, "MPI"): libtutti_mpi.so provides them over the duplicated communicator of
// an MPI-mode Session. libtutti links no MPI, so under TUTTI_TRANSPORT=mpi it finds the already
// loaded libtutti_mpi and calls its one exported function, tutti_mpi_transport_open(), which hands
// back this runtime's MessageCarrier. As with the GPU module (gpu/module_api.h) both sides are
// built from this tree by one compiler, so the interface is plain C++; kMessagePipeApi guards
// against a libtutti_mpi of another build.
//
// Ownership: the runtime's device owns the carrier; each channel or stream owns its pipe, and the
// pipe's pending sends. Threads: the carrier is thread-safe (lanes and point-to-point threads open
// pipes concurrently, which is why MPI must provide MPI_THREAD_MULTIPLE); a pipe and its pending
// sends belong to the one thread that owns their channel or stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tutti::transport {

// Bumped whenever anything in this header changes shape.
constexpr int kMessagePipeApi = 1;

// One message on its way to the peer, in a buffer it owns until the send completed.
class PendingSend {
 public:
  // Not done yet: the carrier cancels the send, or, where it cannot, lets it finish on its own
  // and keeps the buffer alive for it (a channel torn down mid-message by an abort).
  virtual ~PendingSend() = default;
  // Whether the peer's side has taken the message (its buffer may be reused). Never blocks.
  virtual Status Test(bool* done) = 0;
  // The buffer, once done, for the next message.
  virtual std::unique_ptr<char[]> Reclaim() = 0;
};

// Messages between this rank and one peer on one channel (a set's incarnation, or a negative
// point-to-point channel), both directions. Messages of a pipe never match those of another
// channel or peer, and arrive in the order they were sent.
class MessagePipe {
 public:
  virtual ~MessagePipe() = default;
  // Posts the first `len` bytes of `buffer` as one message.
  virtual Status Send(std::unique_ptr<char[]> buffer, size_t len,
                      std::unique_ptr<PendingSend>* pending) = 0;
  // Whether the peer's next message has arrived, and its size. Never blocks. The message is held
  // for Receive: a second Probe reports the same one.
  virtual Status Probe(bool* arrived, size_t* len) = 0;
  // Moves the held message into `data` (room for its whole size). Returns once its bytes are
  // there; they are on their way already, so this takes as long as the copy.
  virtual Status Receive(void* data) = 0;
};

// This runtime's messages, from the carrier's point of view.
class MessageCarrier {
 public:
  virtual ~MessageCarrier() = default;
  // This process's rank among the carrier's, which must be its tutti rank.
  virtual int32_t rank() const = 0;
  // The pipe with `peer` on `channel`; kLimitExceeded if the carrier cannot number the channel.
  virtual Status Open(int32_t channel, int32_t peer, std::unique_ptr<MessagePipe>* pipe) = 0;
};

// The runtime's carrier if `transport` names a backend that needs one (Backend::needs_carrier;
// null otherwise), from the libtutti_mpi loaded in this process, for the MPI-mode runtime being
// made on this thread (transport/carrier_loader.cc). kInvalidArgument where there is none
// ("TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)") or MPI lacks MPI_THREAD_MULTIPLE.
Status OpenCarrier(const std::string& transport, std::unique_ptr<MessageCarrier>* carrier);

}  // namespace tutti::transport

// libtutti_mpi's one entry point for libtutti. Called by tutti_init on the thread that runs it:
// returns TUTTI_OK (0) and a carrier the caller owns for the MPI-mode runtime being made on this
// thread (inside tutti_mpi_init); else a tutti status and `error`: not in MPI mode, MPI without
// MPI_THREAD_MULTIPLE, or `api` other than kMessagePipeApi.
extern "C" int tutti_mpi_transport_open(int api, tutti::transport::MessageCarrier** carrier,
                                        char* error, size_t error_size);
