#include "proto/protocol.h"

namespace tutti::wire {

std::string Encode(Frame& frame, uint64_t epoch) {
  frame.set_magic(kMagic);
  frame.set_version(kProtocolVersion);
  frame.set_epoch(epoch);
  return frame.SerializeAsString();
}

}  // namespace tutti::wire
