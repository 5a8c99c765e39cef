#include "mpi/transport/mpi_carrier.h"

#include <limits>
#include <string>

namespace tutti::mpi {
namespace {

using transport::MessagePipe;
using transport::PendingSend;

bool Finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

Status Failed(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Status(Code::kInternal, std::string(call) + " failed: " + std::string(text, len));
}

class MpiPendingSend : public PendingSend {
 public:
  MpiPendingSend(std::unique_ptr<char[]> buffer, MPI_Request request)
      : buffer_(std::move(buffer)), request_(request) {}

  ~MpiPendingSend() override {
    if (request_ == MPI_REQUEST_NULL || Finalized()) return;
    // Torn down mid-message (an abort, a lost peer): take the send back if MPI can; if it cannot
    // (many MPIs never cancel a send), let it finish on its own and leave it the buffer.
    MPI_Cancel(&request_);
    int done = 0;
    MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (done) return;
    MPI_Request_free(&request_);
    buffer_.release();  // deliberately kept: MPI may still read it
  }

  Status Test(bool* done) override {
    int flag = 0;
    const int code = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) return Failed("MPI_Test", code);
    *done = flag != 0;
    return Status::Ok();
  }

  std::unique_ptr<char[]> Reclaim() override { return std::move(buffer_); }

 private:
  std::unique_ptr<char[]> buffer_;
  MPI_Request request_;
};

class MpiPipe : public MessagePipe {
 public:
  MpiPipe(MPI_Comm comm, int peer, int tag) : comm_(comm), peer_(peer), tag_(tag) {}

  Status Send(std::unique_ptr<char[]> buffer, size_t len,
              std::unique_ptr<PendingSend>* pending) override {
    MPI_Request request = MPI_REQUEST_NULL;
    const int code = MPI_Isend(buffer.get(), static_cast<int>(len), MPI_BYTE, peer_, tag_, comm_,
                               &request);
    if (code != MPI_SUCCESS) return Failed("MPI_Isend", code);
    *pending = std::make_unique<MpiPendingSend>(std::move(buffer), request);
    return Status::Ok();
  }

  Status Probe(bool* arrived, size_t* len) override {
    if (!held_) {
      int found = 0;
      MPI_Status status;
      const int code = MPI_Improbe(peer_, tag_, comm_, &found, &message_, &status);
      if (code != MPI_SUCCESS) return Failed("MPI_Improbe", code);
      if (found) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        held_ = true;
        held_len_ = static_cast<size_t>(count);
      }
    }
    *arrived = held_;
    *len = held_ ? held_len_ : 0;
    return Status::Ok();
  }

  Status Receive(void* data) override {
    if (!held_) return Status(Code::kInternal, "MPI receive without a probed message");
    held_ = false;
    const int code = MPI_Mrecv(data, static_cast<int>(held_len_), MPI_BYTE, &message_,
                               MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) return Failed("MPI_Mrecv", code);
    return Status::Ok();
  }

  ~MpiPipe() override {
    // A matched message cannot be cancelled: receive it into scratch so MPI lets it go.
    if (held_ && !Finalized()) {
      std::unique_ptr<char[]> scratch(new char[held_len_ > 0 ? held_len_ : 1]);
      MPI_Mrecv(scratch.get(), static_cast<int>(held_len_), MPI_BYTE, &message_, MPI_STATUS_IGNORE);
    }
  }

 private:
  MPI_Comm comm_;
  int peer_;
  int tag_;
  bool held_ = false;  // message_ matched by Probe, not received yet
  size_t held_len_ = 0;
  MPI_Message message_ = MPI_MESSAGE_NULL;
};

}  // namespace

MpiCarrier::MpiCarrier(MPI_Comm comm, int rank) : comm_(comm), rank_(rank), tag_limit_(32767) {
  int* limit = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &limit, &found);
  if (found && limit != nullptr) tag_limit_ = *limit;
}

Status MpiCarrier::Open(int32_t channel, int32_t peer, std::unique_ptr<MessagePipe>* pipe) {
  const int64_t tag = channel >= 0 ? 2 * int64_t{channel} : 2 * (-1 - int64_t{channel}) + 1;
  if (tag > tag_limit_)
    return Status(Code::kLimitExceeded,
                  "limit exceeded: data-plane channel " + std::to_string(channel) +
                      " needs MPI tag " + std::to_string(tag) + ", above this MPI's MPI_TAG_UB " +
                      std::to_string(tag_limit_) + " (TUTTI_TRANSPORT=mpi)");
  *pipe = std::make_unique<MpiPipe>(comm_, peer, static_cast<int>(tag));
  return Status::Ok();
}

}  // namespace tutti::mpi
