// A raw ZeroMQ client of tuttid that speaks the wire format directly, as a misbehaving or
// hostile program would: for the tests of what tuttid refuses.
#pragma once

#include <string>
#include <vector>

#include <zmq.hpp>

#include "proto/protocol.h"

namespace tutti::testing {

// A raw DEALER connected to tuttid, as a misbehaving client would have.
class RawClient {
 public:
  // `endpoint` may name a source address: "tcp://127.0.0.2:0;127.0.0.1:PORT".
  explicit RawClient(const std::string& endpoint) : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 10000);
    socket_.connect(endpoint);
  }
  void Send(const std::string& bytes) { socket_.send(zmq::buffer(bytes), zmq::send_flags::none); }
  void SendParts(const std::vector<std::string>& parts) {
    for (size_t i = 0; i < parts.size(); ++i)
      socket_.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore
                                                               : zmq::send_flags::none);
  }
  // The refusal's "<code> <message>", or "" if nothing came within the receive timeout.
  std::string Refusal() {
    wire::Frame frame;
    if (!Receive(&frame)) return "";
    if (!frame.has_refusal()) return "not a refusal";
    return std::to_string(frame.refusal().error().code()) + " " + frame.refusal().error().message();
  }
  // The next frame tuttid sent, or false if none came within the receive timeout. Heartbeats are
  // skipped: tuttid sends them whenever some connection closes (Job::CheckConnections).
  bool Receive(wire::Frame* frame) {
    while (true) {
      zmq::message_t reply;
      if (!socket_.recv(reply)) return false;
      if (!frame->ParseFromArray(reply.data(), static_cast<int>(reply.size()))) return false;
      if (!frame->has_heartbeat()) return true;
    }
  }
  void SetReceiveTimeout(int ms) { socket_.set(zmq::sockopt::rcvtimeo, ms); }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

inline std::string Encoded(wire::Frame frame) { return wire::Encode(frame); }

// An Announce of a one-float32 sum allreduce `name` on the world, stamped with
// `membership_epoch` (0: a frame without the field).
inline wire::Frame AllreduceAnnounce(const std::string& name, uint64_t membership_epoch = 0) {
  wire::Frame frame;
  auto* spec = frame.mutable_announce()->add_sets()->add_tensors();
  spec->set_name(name);
  spec->set_kind(wire::COLLECTIVE_ALLREDUCE);
  spec->set_dtype(3);  // TUTTI_DTYPE_FLOAT32
  spec->add_shape(1);
  spec->set_reduce_op(1);  // sum
  spec->set_prescale(1);
  spec->set_postscale(1);
  if (membership_epoch != 0) frame.set_membership_epoch(membership_epoch);
  return frame;
}

inline wire::Frame Register(int32_t rank, int32_t size) {
  wire::Frame frame;
  frame.mutable_register_()->set_job("intruder");
  frame.mutable_register_()->set_rank(rank);
  frame.mutable_register_()->set_size(size);
  return frame;
}

}  // namespace tutti::testing
