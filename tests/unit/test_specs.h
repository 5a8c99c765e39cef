// Tensor specs the coordinator's unit tests announce.
#pragma once

#include <string>

#include "proto/protocol.h"

namespace tutti::server {

// A float32 sum allreduce of `n` elements, as a rank announces it.
inline wire::TensorSpec Spec(const std::string& name, int64_t n) {
  wire::TensorSpec spec;
  spec.set_name(name);
  spec.set_kind(wire::COLLECTIVE_ALLREDUCE);
  spec.set_dtype(3);
  spec.set_reduce_op(1);
  spec.set_prescale(1.0);
  spec.set_postscale(1.0);
  spec.add_shape(n);
  return spec;
}

}  // namespace tutti::server
