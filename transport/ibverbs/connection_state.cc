#include "transport/ibverbs/connection_state.h"

#include <string>

namespace tutti::transport::ibverbs {

const char* Name(ConnState state) {
  switch (state) {
    case ConnState::kCreated: return "created";
    case ConnState::kInit: return "init";
    case ConnState::kOffered: return "offered";
    case ConnState::kAnswered: return "answered";
    case ConnState::kRtr: return "ready to receive";
    case ConnState::kRts: return "ready to send";
    case ConnState::kReady: return "ready";
    case ConnState::kFallback: return "fallen back to TCP";
    case ConnState::kDraining: return "draining";
    case ConnState::kClosed: return "closed";
  }
  return "unknown";
}

const char* Name(ConnEvent event) {
  switch (event) {
    case ConnEvent::kQpCreated: return "queue pair created";
    case ConnEvent::kOfferSent: return "offer sent";
    case ConnEvent::kOfferReceived: return "offer received";
    case ConnEvent::kAnswerSent: return "answer sent";
    case ConnEvent::kAnswerReceived: return "answer received";
    case ConnEvent::kRefusalReceived: return "refusal received";
    case ConnEvent::kToRtr: return "move to RTR";
    case ConnEvent::kToRts: return "move to RTS";
    case ConnEvent::kReadySent: return "ready sent";
    case ConnEvent::kReadyReceived: return "ready received";
    case ConnEvent::kLost: return "peer lost";
    case ConnEvent::kClose: return "close";
  }
  return "unknown";
}

bool ConnectionState::Next(ConnEvent event, ConnState* next) const {
  using S = ConnState;
  using E = ConnEvent;
  if (event == E::kClose) return *next = S::kClosed, true;
  if (state_ == S::kClosed) return false;
  // The steps both roles take alike.
  struct Step {
    S from;
    E event;
    S to;
  };
  static constexpr Step kCommon[] = {
      {S::kCreated, E::kQpCreated, S::kInit},
      {S::kRtr, E::kToRts, S::kRts},
      {S::kReady, E::kLost, S::kDraining},
  };
  static constexpr Step kConnector[] = {
      {S::kInit, E::kOfferSent, S::kOffered},
      {S::kOffered, E::kAnswerReceived, S::kAnswered},
      {S::kOffered, E::kRefusalReceived, S::kFallback},
      {S::kAnswered, E::kToRtr, S::kRtr},
      {S::kRts, E::kReadySent, S::kReady},
  };
  static constexpr Step kAcceptor[] = {
      {S::kInit, E::kOfferReceived, S::kOffered},
      {S::kOffered, E::kToRtr, S::kRtr},
      {S::kRts, E::kAnswerSent, S::kAnswered},
      {S::kAnswered, E::kReadyReceived, S::kReady},
  };
  for (const Step& step : kCommon)
    if (step.from == state_ && step.event == event) return *next = step.to, true;
  if (role_ == Role::kConnector) {
    for (const Step& step : kConnector)
      if (step.from == state_ && step.event == event) return *next = step.to, true;
  } else {
    for (const Step& step : kAcceptor)
      if (step.from == state_ && step.event == event) return *next = step.to, true;
  }
  return false;
}

Status ConnectionState::Apply(ConnEvent event) {
  ConnState next;
  if (!Next(event, &next))
    return Status(Code::kInternal, std::string("ibverbs: ") + Name(event) + " while " +
                                       Name(state_) + " (" +
                                       (role_ == Role::kConnector ? "connector" : "acceptor") +
                                       ")");
  state_ = next;
  return Status::Ok();
}

}  // namespace tutti::transport::ibverbs
