// The coordinator link's liveness, on its I/O thread: heartbeats and the lease that declares
// tuttid lost, and the socket monitor that turns a refused ZeroMQ handshake (wrong CURVE keys,
// CURVE on one side only) into kAuthFailed at once instead of a silent wait for a deadline.
#include <cstring>

#include "client/control/coordinator_link.h"

namespace tutti::client {

std::chrono::milliseconds CoordinatorLink::KeepAlive() {
  using std::chrono::milliseconds;
  milliseconds interval, lease;
  const auto now = transport::Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_ || !dead_.ok() || attaching_) {
      // The loop's time is kept before registration too: a process frozen between the Welcome
      // and this thread's next turn must be seen to have overslept, not to have heard nothing.
      last_loop_ = now;
      return milliseconds(-1);
    }
    interval = heartbeat_interval_;
    lease = lease_;
  }
  if (last_received_ == transport::Clock::time_point{}) last_received_ = last_heartbeat_ = now;
  // A loop that overslept by far means this process was frozen (SIGSTOP, a debugger): the
  // silence was ours, not the coordinator's. Ask again and give it a full lease to answer, which
  // is also how a frozen rank learns that it was evicted meanwhile.
  if (last_loop_ != transport::Clock::time_point{} && now - last_loop_ > interval + lease / 2) {
    last_received_ = now;
    last_heartbeat_ = now - interval;
  }
  last_loop_ = now;
  if (now - last_received_ >= lease) {
    if (ha_) {
      StartFailover("no message from " + endpoint_ + " for " + std::to_string(lease.count()) + " ms",
                    "");
      return milliseconds(0);
    }
    Die(Status(Code::kCoordinatorLost,
               "coordinator lost: no message from " + endpoint_ + " for " +
                   std::to_string(lease.count()) + " ms"));
    return milliseconds(-1);
  }
  if (now - last_heartbeat_ >= interval) {
    wire::Frame heartbeat;
    heartbeat.mutable_heartbeat();
    (void)socket_.send(zmq::buffer(wire::Encode(heartbeat, epoch_)), zmq::send_flags::dontwait);
    last_heartbeat_ = now;
  }
  auto next = std::min(last_heartbeat_ + interval, last_received_ + lease) - now;
  return std::max(milliseconds(1), std::chrono::ceil<milliseconds>(next));
}

void CoordinatorLink::OnMonitorEvent() {
  zmq::message_t event, address;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
    if (event.size() < 6) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof(value));
    // In an HA group, once this rank's keys were accepted, a handshake that fails without detail
    // (the connection reset under it) is a member going away mid-handshake, as a leader being
    // killed does, not a security mismatch: look for the leader as after a disconnection.
    const bool lost_in_handshake = id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && ha_ && welcomed_;
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED || id == ZMQ_EVENT_DISCONNECTED || lost_in_handshake) {
      // Only about the endpoint talked to now: one left behind may still report its end.
      if (address.to_string() != endpoint_) continue;
      bool attached, attaching;
      {
        std::lock_guard<std::mutex> lock(mu_);
        attached = registered_ && dead_.ok() && !attaching_ && !stopping_;
        attaching = attaching_ && dead_.ok() && !stopping_;
      }
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) connected_ = true;
      else if (attached) StartFailover("the connection to " + endpoint_ + " closed", "");
      // The member it registered or resumed with went away before answering: the next one.
      else if (attaching) TryNext("", std::chrono::milliseconds(100));
      continue;
    }
    Status status;
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
      status = Status(Code::kAuthFailed,
                      "authentication failed: tuttid at " + endpoint_ + " refused this rank's CURVE "
                      "key (ZAP status " + std::to_string(value) + "): is TUTTI_CURVE_PUBLIC_KEY "
                      "listed in tuttid's --curve-clients?");
    else if (!curve_)
      status = Status(Code::kAuthFailed,
                      "authentication failed: the handshake with tuttid at " + endpoint_ +
                          " failed (ZeroMQ handshake error " + std::to_string(value) +
                          "): tuttid probably requires CURVE; set TUTTI_CURVE_SERVER_KEY, "
                          "TUTTI_CURVE_PUBLIC_KEY and TUTTI_CURVE_SECRET_KEY");
    else
      status = Status(Code::kAuthFailed,
                      "authentication failed: the CURVE handshake with tuttid at " + endpoint_ +
                          " failed (ZeroMQ handshake error " + std::to_string(value) +
                          "): is TUTTI_CURVE_SERVER_KEY tuttid's public key, and does tuttid "
                          "require CURVE?");
    AnswerRegistration(Answer{status, {}});
    // libzmq does not reconnect after a failed handshake: the link is dead, registered or not,
    // and a Register that comes later fails at once with this status.
    Die(status);
  }
}

}  // namespace tutti::client
