// The life of one ibverbs connection, from queue-pair creation to teardown, as a table of allowed
// steps with no verbs in it (unit-tested without a device). The setup code and the channel
// report every step here and stop at the first one the table refuses, so that an exchange that
// went out of order (a peer of another version, a bug) fails with the step and state named
// instead of posting to a queue pair that is not ready.
//
// The connecting side (the lower rank) offers first; the accepting side answers only once its
// queue pair is ready to receive (RTR) and to send (RTS), and posts nothing until the connector
// says it is ready too, since a write to a queue pair not yet in RTR would be dropped and retried
// until the connection fails:
//   connector: created -> init -> offered (offer sent) -> answered (answer received) -> rtr ->
//              rts -> ready (ready sent); or offered -> fallback (refusal received: TCP instead)
//   acceptor:  created -> init -> offered (offer received) -> rtr -> rts -> answered (answer
//              sent) -> ready (ready received)
// Then ready -> draining when the peer is lost (its socket closed, or a completion failed):
// bytes that arrived can still be read, nothing more is posted. Close is allowed from every
// state and is final; a failed setup step leaves the state where it was, for the error message.
//
// Owned and used by one channel, on its thread.
#pragma once

#include "common/status.h"

namespace tutti::transport::ibverbs {

enum class Role { kConnector, kAcceptor };

enum class ConnState { kCreated, kInit, kOffered, kAnswered, kRtr, kRts, kReady, kFallback,
                       kDraining, kClosed };

enum class ConnEvent {
  kQpCreated,         // the queue pair exists, in INIT, and this side's parameters are known
  kOfferSent,         // connector
  kOfferReceived,     // acceptor
  kAnswerSent,        // acceptor
  kAnswerReceived,    // connector
  kRefusalReceived,   // connector: the peer has no device; the pair falls back to TCP
  kToRtr,
  kToRts,
  kReadySent,         // connector
  kReadyReceived,     // acceptor
  kLost,              // the peer's socket closed, or a completion failed
  kClose,
};

const char* Name(ConnState state);
const char* Name(ConnEvent event);

class ConnectionState {
 public:
  explicit ConnectionState(Role role) : role_(role) {}

  // Takes the step, or refuses it with kInternal "ibverbs: <event> while <state> (<role>)" and
  // stays where it was.
  Status Apply(ConnEvent event);

  ConnState state() const { return state_; }
  Role role() const { return role_; }
  // Writes may be posted.
  bool can_post() const { return state_ == ConnState::kReady; }
  // Bytes that arrived may be read.
  bool can_read() const { return state_ == ConnState::kReady || state_ == ConnState::kDraining; }
  // A queue pair exists that teardown must move to the error state and drain.
  bool holds_queue_pair() const {
    return state_ != ConnState::kCreated && state_ != ConnState::kClosed;
  }

 private:
  // The state `event` leads to from the current one, or false.
  bool Next(ConnEvent event, ConnState* next) const;

  const Role role_;
  ConnState state_ = ConnState::kCreated;
};

}  // namespace tutti::transport::ibverbs
