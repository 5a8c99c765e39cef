#include "proto/protocol.h"

namespace tutti::wire {

const char* KindName(CollectiveKind kind) {
  switch (kind) {
    case COLLECTIVE_ALLREDUCE: return "allreduce";
    case COLLECTIVE_BROADCAST: return "broadcast";
    case COLLECTIVE_ALLGATHER: return "allgather";
    case COLLECTIVE_REDUCESCATTER: return "reducescatter";
    case COLLECTIVE_ALLTOALL: return "alltoall";
    case COLLECTIVE_BARRIER: return "barrier";
    case POINT_TO_POINT_SEND: return "send";
    case POINT_TO_POINT_RECV: return "recv";
    default: return "collective";
  }
}

std::string Encode(Frame& frame, uint64_t epoch) {
  frame.set_magic(kMagic);
  frame.set_version(kProtocolVersion);
  frame.set_epoch(epoch);
  return frame.SerializeAsString();
}

}  // namespace tutti::wire
