// LeaderLease: one tuttid's claim to lead its HA group (docs/high-availability.md), held as an
// etcd lease that owns the group's leader key.
//
// Campaign() grants a lease and tries to create GROUP/leader with this instance's endpoint; the
// winner then bumps GROUP/term, the coordinator epoch every frame of its reign carries. Renew()
// keeps the lease alive. Fencing is local and needs no etcd: MayRelease(now) is true only while
// the lease is certainly still held, i.e. before (the send time of the last successful renewal
// + the TTL it reported - a safety margin). A leader cut off from etcd, frozen, or slow thus
// stops releasing collectives before etcd can let another instance win; a standby can win only
// after the old lease expired in etcd, which is after the old leader stopped.
//
// Thread model: one thread (tuttid's HA thread) owns the object and its EtcdClient; MayRelease
// and term() are safe from any thread (the coordinator loop asks before each release).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "server/ha/etcd_client.h"

namespace tutti::server::ha {

using Clock = std::chrono::steady_clock;

struct LeaderLeaseOptions {
  std::string etcd;          // an etcd client URL
  std::string group;         // the HA group's name: its keys live under /tutti/GROUP/
  std::string endpoint;      // where ranks reach this instance (the leader key's value)
  int64_t ttl_s = 5;         // the lease's TTL
  // Fencing stops this long before the lease could expire, for clock rate differences and the
  // time a release takes to leave the process.
  std::chrono::milliseconds margin{500};
  std::chrono::milliseconds etcd_timeout{1000};
};

class LeaderLease {
 public:
  explicit LeaderLease(LeaderLeaseOptions options);
  ~LeaderLease();  // revokes a held lease (an orderly step-down), best effort

  // One attempt: true in *won if this instance now leads (term() is its new term); else
  // *leader names the current holder's endpoint (empty if the key vanished meanwhile).
  Status Campaign(bool* won, std::string* leader);
  // Renews a held lease. A failure (etcd unreachable, or the lease expired) leaves fencing to
  // run out at its deadline; an expired lease means leadership is lost for good (leading()
  // turns false) and the instance must campaign again.
  Status Renew();
  // Steps down: revokes the lease, so that a standby wins at once.
  Status Resign();

  bool leading() const { return leading_.load(); }
  // True while the lease is certainly held (see the header comment). Any thread.
  bool MayRelease(Clock::time_point now) const;
  Clock::time_point fenced_at() const { return Clock::time_point(Clock::duration(fence_.load())); }
  uint64_t term() const { return term_.load(); }
  // The holder of the leader key now, "" if none (a standby's redirect).
  Status CurrentLeader(std::string* leader);

  const std::string& leader_key() const { return leader_key_; }
  const std::string& term_key() const { return term_key_; }

 private:
  // Moves the fencing deadline to `sent` + `ttl_s` - margin.
  void Extend(Clock::time_point sent, int64_t ttl_s);
  // The group's coordinator epoch + 1, written by the new leader alone.
  Status BumpTerm();

  const LeaderLeaseOptions options_;
  const std::string leader_key_, term_key_;
  EtcdClient etcd_;
  int64_t lease_ = 0;
  std::atomic<bool> leading_{false};
  std::atomic<Clock::rep> fence_{0};  // Clock::time_point as a count, for any thread
  std::atomic<uint64_t> term_{0};
};

}  // namespace tutti::server::ha
