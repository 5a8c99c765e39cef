// HaMember: this tuttid's membership in an HA group (docs/high-availability.md). Its own thread
// (the HA thread) campaigns for the leader lease while a standby, renews it while leading, loads
// the job records when it wins, and writes the records the event loop hands it. The event loop
// never waits for etcd: it takes role changes and hands writes over through this object.
//
// Thread model: the HA thread owns the LeaderLease and the records' EtcdClient. TakeChange,
// Write, MayRelease and Describe are for the event loop's thread (MayRelease for any thread).
// Lifetime: outlives the coordinator that uses it; the destructor stops the thread and resigns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "server/ha/leader_lease.h"

namespace tutti::server {

struct HaOptions {
  std::string etcd;       // an etcd client URL
  std::string group;      // the group's keys live under /tutti/GROUP/
  std::string advertise;  // this instance's endpoint as ranks list it in TUTTI_COORDINATOR
  int64_t ttl_s = 5;      // the leader lease's TTL
};

class HaMember {
 public:
  // The group's coordinator epoch: created once in etcd by the first instance ever started, read
  // by the others, so that ranks' frames carry one epoch whoever leads. Blocking.
  static Status GroupEpoch(const HaOptions& options, uint64_t proposed, uint64_t* epoch);

  explicit HaMember(HaOptions options);
  ~HaMember();
  HaMember(const HaMember&) = delete;
  HaMember& operator=(const HaMember&) = delete;

  // Starts the HA thread; `advertise` replaces an empty HaOptions::advertise (the endpoint the
  // coordinator bound, known only once it did).
  void Start(const std::string& advertise);

  // A change of role since the last call: leading (with this term, and the job records etcd
  // holds) or a standby naming the leader ("" if none).
  struct Role {
    bool leading = false;
    std::string leader;
    uint64_t term = 0;
    std::map<std::string, std::string> records;  // job id -> record, when it starts leading
  };
  std::optional<Role> TakeChange();
  // Records to write ((job id, record); an empty record erases it), in order.
  void Write(std::vector<std::pair<std::string, std::string>> changes);
  // The fence: true only while this instance certainly holds the lease.
  bool MayRelease() const;
  // For the status page: role, leader, term, and since when it could not renew.
  nlohmann::json Describe() const;

 private:
  void Run();
  // While leading: renews, writes, and steps down when the lease is lost for good.
  void Lead();
  void Publish(Role role);

  HaOptions options_;  // advertise settles in Start
  std::unique_ptr<ha::LeaderLease> lease_;  // made in Start; HA thread only (MayRelease, term(): any)
  ha::EtcdClient records_etcd_;  // HA thread only
  const std::string jobs_prefix_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable wake_;
  bool stop_ = false;
  std::optional<Role> change_;
  std::vector<std::pair<std::string, std::string>> writes_;
  std::string leader_;       // as last published
  bool leading_ = false;
  std::string last_error_;   // etcd's last failure, "" after a success
  ha::Clock::time_point failing_since_{};

  std::thread thread_;
};

}  // namespace tutti::server
