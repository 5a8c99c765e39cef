// The MPI backend's carrier (transport/message_pipe.h): tutti's data-plane bytes as MPI
// point-to-point messages on an MPI-mode Session's duplicated communicator, so that a cluster's
// tuned MPI (its RDMA transports) carries them (docs/transports.md, "MPI").
//
// Matching: a pipe's messages carry the tag of its channel (set incarnations 2c, point-to-point
// channels 2(-1-c)+1), and MPI matches by (communicator, source, tag), so two sets or streams
// sharing a pair of ranks never take each other's messages, and the Session's own collectives
// (tutti_mpi_init, tutti_process_set_from_comm) never meet them. Receives probe first
// (MPI_Improbe), so the receiver learns each message's size and receives it whole
// (MPI_Mrecv).
//
// Threads: MPI_THREAD_MULTIPLE, since lanes and point-to-point threads call MPI at once. The
// carrier is immutable and thread-safe; a pipe belongs to the thread owning its channel.
// Lifetime: the runtime's device owns the carrier and is destroyed by tutti_finalize, before
// tutti_mpi_finalize frees the communicator.
#pragma once

#include <mpi.h>

#include <memory>

#include "transport/message_pipe.h"

namespace tutti::mpi {

class MpiCarrier : public transport::MessageCarrier {
 public:
  // `comm` stays valid for the carrier's life (a Session's duplicate).
  MpiCarrier(MPI_Comm comm, int rank);

  int32_t rank() const override { return rank_; }
  Status Open(int32_t channel, int32_t peer, std::unique_ptr<transport::MessagePipe>* pipe) override;

 private:
  MPI_Comm comm_;
  int rank_;
  int tag_limit_;  // MPI_TAG_UB
};

}  // namespace tutti::mpi
