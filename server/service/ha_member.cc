#include "server/service/ha_member.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace tutti::server {
namespace {

// How often a standby tries to take the lead: a failover waits for the old lease to expire
// (its TTL) plus at most this.
constexpr auto kCampaignInterval = std::chrono::milliseconds(200);

std::string JobsPrefix(const std::string& group) { return "/tutti/" + group + "/jobs/"; }

}  // namespace

Status HaMember::GroupEpoch(const HaOptions& options, uint64_t proposed, uint64_t* epoch) {
  ha::EtcdClient etcd(options.etcd, std::chrono::milliseconds(2000));
  bool created = false;
  ha::KeyValue current;
  TUTTI_RETURN_IF_ERROR(etcd.CreateIfAbsent("/tutti/" + options.group + "/epoch",
                                            fmt::format("{:016x}", proposed), 0, &created,
                                            &current));
  try {
    *epoch = std::stoull(current.value, nullptr, 16);
  } catch (const std::exception&) {
    return Status(Code::kInternal, "the HA group's epoch in etcd is not a number: '" +
                                       current.value + "'");
  }
  return Status::Ok();
}

HaMember::HaMember(HaOptions options)
    : options_(std::move(options)),
      records_etcd_(options_.etcd, std::chrono::milliseconds(1000)),
      jobs_prefix_(JobsPrefix(options_.group)) {}

HaMember::~HaMember() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  lease_.reset();  // resigns a held lease: a standby takes over at once
}

void HaMember::Start(const std::string& advertise) {
  if (options_.advertise.empty()) options_.advertise = advertise;
  lease_ = std::make_unique<ha::LeaderLease>(ha::LeaderLeaseOptions{
      options_.etcd, options_.group, options_.advertise, options_.ttl_s});
  thread_ = std::thread([this] { Run(); });
}

void HaMember::Publish(Role role) {
  std::lock_guard<std::mutex> lock(mu_);
  leading_ = role.leading;
  leader_ = role.leader;
  change_ = std::move(role);
}

std::optional<HaMember::Role> HaMember::TakeChange() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Role> change;
  change.swap(change_);
  return change;
}

void HaMember::Write(std::vector<std::pair<std::string, std::string>> changes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& change : changes) writes_.push_back(std::move(change));
  }
  wake_.notify_all();
}

bool HaMember::MayRelease() const { return lease_ && lease_->MayRelease(ha::Clock::now()); }

nlohmann::json HaMember::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json d{{"group", options_.group},
                   {"etcd", options_.etcd},
                   {"self", options_.advertise},
                   {"role", leading_ ? (MayRelease() ? "leader" : "leader (fenced)") : "standby"},
                   {"leader", leader_},
                   {"term", lease_ ? lease_->term() : 0}};
  if (!last_error_.empty()) {
    d["etcd_error"] = last_error_;
    d["etcd_failing_s"] =
        std::chrono::duration<double>(ha::Clock::now() - failing_since_).count();
  }
  return d;
}

void HaMember::Run() {
  std::string last_leader = "\x01";  // nothing published yet
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
    }
    bool won = false;
    std::string leader;
    Status status = lease_->Campaign(&won, &leader);
    std::map<std::string, std::string> records;
    if (status.ok() && won) {
      std::vector<ha::KeyValue> found;
      status = records_etcd_.GetPrefix(jobs_prefix_, &found);
      for (const ha::KeyValue& kv : found) records[kv.key.substr(jobs_prefix_.size())] = kv.value;
      if (!status.ok()) (void)lease_->Resign();  // cannot lead without the records: retry
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.ok()) {
        if (last_error_.empty()) failing_since_ = ha::Clock::now();
        if (last_error_ != status.message())
          spdlog::warn("HA group '{}': {}", options_.group, status.message());
        last_error_ = status.message();
      } else {
        last_error_.clear();
      }
    }
    if (status.ok() && won) {
      spdlog::info("HA group '{}': leading with term {} ({} job records)", options_.group,
                   lease_->term(), records.size());
      Publish(Role{true, options_.advertise, lease_->term(), std::move(records)});
      Lead();
      last_leader = "\x01";
      continue;
    }
    if (status.ok() && leader != last_leader) {
      spdlog::info("HA group '{}': standby; the leader is {}", options_.group,
                   leader.empty() ? "unknown" : leader);
      Publish(Role{false, leader, 0, {}});
      last_leader = leader;
    }
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, kCampaignInterval, [this] { return stop_; });
  }
}

void HaMember::Lead() {
  // Renew at a third of the TTL: two renewals may fail before the fence closes.
  const auto interval = std::chrono::milliseconds(options_.ttl_s * 1000 / 3);
  auto next_renewal = ha::Clock::now() + interval;
  bool write_failed = false;  // retried with the next renewal, not at once
  while (true) {
    std::vector<std::pair<std::string, std::string>> writes;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_until(lock, next_renewal,
                       [&] { return stop_ || (!writes_.empty() && !write_failed); });
      if (stop_) return;
      writes.swap(writes_);
    }
    Status status;
    if (ha::Clock::now() >= next_renewal) {
      write_failed = false;
      status = lease_->Renew();
      next_renewal = ha::Clock::now() + (status.ok() ? interval : std::chrono::milliseconds(200));
      if (!lease_->leading()) {
        spdlog::error("HA group '{}': {}; stepping down", options_.group, status.message());
        Publish(Role{false, "", 0, {}});
        std::lock_guard<std::mutex> lock(mu_);
        writes_.clear();  // the new leader writes its own
        return;
      }
    }
    // Written in order; one that fails is kept, with the ones after it, for the next turn.
    size_t done = 0;
    for (; done < writes.size() && status.ok(); ++done) {
      const auto& [id, record] = writes[done];
      status = record.empty() ? records_etcd_.Delete(jobs_prefix_ + id)
                              : records_etcd_.Put(jobs_prefix_ + id, record);
      if (!status.ok()) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (done < writes.size()) {
      writes_.insert(writes_.begin(), std::make_move_iterator(writes.begin() + done),
                     std::make_move_iterator(writes.end()));
    }
    if (!status.ok()) {
      write_failed = true;
      if (last_error_.empty()) failing_since_ = ha::Clock::now();
      if (last_error_ != status.message())
        spdlog::warn("HA group '{}': {} (releases stop once the lease may have expired)",
                     options_.group, status.message());
      last_error_ = status.message();
      next_renewal = std::min(next_renewal, ha::Clock::now() + std::chrono::milliseconds(200));
    } else {
      if (!last_error_.empty())
        spdlog::info("HA group '{}': etcd answers again", options_.group);
      last_error_.clear();
    }
  }
}

}  // namespace tutti::server
