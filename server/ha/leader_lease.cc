#include "server/ha/leader_lease.h"

namespace tutti::server::ha {

LeaderLease::LeaderLease(LeaderLeaseOptions options)
    : options_(std::move(options)),
      leader_key_("/tutti/" + options_.group + "/leader"),
      term_key_("/tutti/" + options_.group + "/term"),
      etcd_(options_.etcd, options_.etcd_timeout) {}

LeaderLease::~LeaderLease() {
  if (leading_) (void)Resign();
}

Status LeaderLease::Campaign(bool* won, std::string* leader) {
  *won = false;
  // The lease runs until at least `sent` + TTL: etcd starts its clock when the grant (or the
  // renewal) arrives. A standby's lease from an earlier campaign is renewed first, so that the
  // fence below never trusts a lease older than this attempt.
  const Clock::time_point sent = Clock::now();
  int64_t ttl_s = 0;
  if (lease_ != 0) TUTTI_RETURN_IF_ERROR(etcd_.KeepAlive(lease_, &ttl_s));
  if (lease_ == 0 || ttl_s <= 0) TUTTI_RETURN_IF_ERROR(etcd_.Grant(options_.ttl_s, &lease_));
  bool created = false;
  KeyValue holder;
  TUTTI_RETURN_IF_ERROR(
      etcd_.CreateIfAbsent(leader_key_, options_.endpoint, lease_, &created, &holder));
  *leader = holder.value;
  // Our own key from an earlier campaign with this lease counts as won too.
  if (!created && holder.lease != lease_) return Status::Ok();
  // The lease is ours from before the grant was sent (at the latest): fence from there.
  Extend(sent, options_.ttl_s);
  TUTTI_RETURN_IF_ERROR(BumpTerm());
  leading_ = true;
  *won = true;
  return Status::Ok();
}

Status LeaderLease::BumpTerm() {
  std::optional<KeyValue> current;
  TUTTI_RETURN_IF_ERROR(etcd_.Get(term_key_, &current));
  uint64_t term = 0;
  if (current) {
    try {
      term = std::stoull(current->value);
    } catch (const std::exception&) {
      return Status(Code::kInternal, "the HA group's term in etcd (" + term_key_ +
                                         ") is not a number: '" + current->value + "'");
    }
  }
  // Only the holder of the leader key writes the term, so a plain put cannot race another.
  TUTTI_RETURN_IF_ERROR(etcd_.Put(term_key_, std::to_string(term + 1)));
  term_ = term + 1;
  return Status::Ok();
}

Status LeaderLease::Renew() {
  if (lease_ == 0) return Status(Code::kInvalidArgument, "no lease to renew: campaign first");
  const Clock::time_point sent = Clock::now();
  int64_t ttl_s = 0;
  TUTTI_RETURN_IF_ERROR(etcd_.KeepAlive(lease_, &ttl_s));
  if (ttl_s <= 0) {
    // Expired in etcd: its key is gone and another instance may lead. Fencing ran out already
    // (renewals stopped for longer than the TTL), and this instance starts over.
    leading_ = false;
    lease_ = 0;
    return Status(Code::kCoordinatorLost,
                  "the HA lease expired in etcd: this tuttid no longer leads group '" +
                      options_.group + "'");
  }
  Extend(sent, ttl_s);
  return Status::Ok();
}

Status LeaderLease::Resign() {
  leading_ = false;
  fence_ = 0;
  if (lease_ == 0) return Status::Ok();
  const int64_t lease = lease_;
  lease_ = 0;
  return etcd_.Revoke(lease);
}

bool LeaderLease::MayRelease(Clock::time_point now) const {
  return leading_.load() && now < fenced_at();
}

Status LeaderLease::CurrentLeader(std::string* leader) {
  std::optional<KeyValue> found;
  TUTTI_RETURN_IF_ERROR(etcd_.Get(leader_key_, &found));
  *leader = found ? found->value : "";
  return Status::Ok();
}

void LeaderLease::Extend(Clock::time_point sent, int64_t ttl_s) {
  const Clock::time_point until = sent + std::chrono::seconds(ttl_s) - options_.margin;
  fence_ = until.time_since_epoch().count();
}

}  // namespace tutti::server::ha
