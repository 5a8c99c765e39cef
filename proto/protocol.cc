#include "proto/protocol.h"

namespace tutti::wire {

std::string Encode(Frame& frame) {
  frame.set_magic(kMagic);
  frame.set_version(kProtocolVersion);
  return frame.SerializeAsString();
}

}  // namespace tutti::wire
