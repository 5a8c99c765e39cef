// One job on tuttid: its rendezvous, its process sets and their negotiations. The job answers its
// ranks through an outbox of frames addressed by ZeroMQ routing id. Single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/protocol.h"
#include "server/negotiator.h"
#include "server/process_set_table.h"

namespace tutti::server {

struct Outgoing {
  std::string peer;  // ZeroMQ routing id
  wire::Frame frame;
};
using Outbox = std::vector<Outgoing>;

class Job {
 public:
  Job(std::string id, std::string token, int32_t size, Clock::time_point rendezvous_deadline,
      int64_t rendezvous_timeout_ms, uint64_t key, uint64_t epoch);

  const std::string& id() const { return id_; }
  const std::string& token() const { return token_; }
  int32_t size() const { return size_; }
  bool welcomed() const { return welcomed_; }
  // A failed job (rendezvous timed out or disagreed) has told its ranks and can be dropped.
  bool failed() const { return failed_; }
  bool everyone_left() const { return welcomed_ && left_ == size_; }
  std::vector<std::string> peers() const;

  // Registers `peer` as `msg.rank()`; the world's last registration welcomes everyone. An error
  // concerns this registrant alone.
  Status Register(const std::string& peer, const wire::Register& msg, Outbox* out);
  void SetAdd(int32_t rank, const wire::SetAdd& msg, Clock::time_point now, Outbox* out);
  void SetRemove(int32_t rank, const wire::SetRemove& msg, Clock::time_point now, Outbox* out);
  void Announce(int32_t rank, const wire::Announce& msg, Outbox* out);
  void Leave(int32_t rank);

  void Tick(Clock::time_point now, Outbox* out);
  std::optional<Clock::time_point> NextDeadline() const;

 private:
  void Welcome(Outbox* out);
  void RefuseAll(Code code, const std::string& message, Outbox* out);
  void Apply(ProcessSetTable::Events& events, Outbox* out);
  void SendExecute(int32_t set_id, Negotiator& negotiator, std::vector<wire::Response> responses,
                   Outbox* out);
  void Refuse(int32_t rank, const Status& status, int32_t set_id, const std::string& tensor,
              Outbox* out);

  std::string id_;
  std::string token_;
  int32_t size_;
  Clock::time_point rendezvous_deadline_;
  int64_t rendezvous_timeout_ms_;
  uint64_t key_;
  uint64_t epoch_;
  std::vector<std::optional<wire::Register>> registrations_;  // by rank
  std::vector<std::string> peer_of_rank_;
  int32_t registered_ = 0;
  int32_t left_ = 0;
  bool welcomed_ = false;
  bool failed_ = false;
  ProcessSetTable sets_;
  std::map<int32_t, Negotiator> negotiators_;  // one per active set
};

}  // namespace tutti::server
