// What the seed scenarios of make_seeds are written with: registration arguments, tensor specs
// filled the way the client runtime fills them, and Scenario, which encodes each frame the way
// the runtime encodes it, records it for fuzz_coordinator_core and keeps it for fuzz_client_frame.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "fuzz_records.h"
#include "proto/protocol.h"

namespace tutti::fuzz_seeds {

namespace fuzz = tutti::fuzz;

struct RegisterArgs {
  std::string job = "train";
  std::string token = "secret";
  int32_t size = 2;
  std::vector<std::vector<int32_t>> static_sets;
  int32_t cache_capacity = 1024;       // kDefaultCacheCapacity
  int64_t fusion_threshold = 1 << 20;  // kDefaultFusionThreshold
  int64_t rendezvous_timeout_ms = 0;   // tuttid's default (fuzz::kRendezvousTimeoutMs)
  std::string transport = "auto";
  bool elastic = false;  // TUTTI_ELASTIC=1 (docs/elastic.md)
  int32_t min_size = 1;
};

// `spec` on GPU `index` whose 16-byte uuid is all `uuid` (0: the runtime gave none).
inline wire::TensorSpec OnGpu(wire::TensorSpec spec, int32_t index, char uuid) {
  spec.set_device_type(1);  // TUTTI_DEVICE_CUDA
  spec.set_device_index(index);
  if (uuid != 0) spec.set_device_uuid(std::string(16, uuid));
  return spec;
}

inline wire::TensorSpec Spec(const std::string& name, wire::CollectiveKind kind,
                      std::initializer_list<int64_t> shape, DType dtype = DType::kFloat32) {
  wire::TensorSpec spec;
  spec.set_name(name);
  spec.set_kind(kind);
  if (kind == wire::COLLECTIVE_BARRIER) return spec;  // Runtime::Validate stops there
  if (kind == wire::COLLECTIVE_ALLREDUCE || kind == wire::COLLECTIVE_REDUCESCATTER) {
    spec.set_reduce_op(static_cast<int32_t>(ReduceOp::kSum));
    spec.set_prescale(1.0);
    spec.set_postscale(1.0);
  }
  spec.set_dtype(static_cast<int32_t>(dtype));
  spec.mutable_shape()->Add(shape.begin(), shape.end());
  return spec;
}

// One scenario: the records for fuzz_coordinator_core, and every frame for fuzz_client_frame.
class Scenario {
 public:
  explicit Scenario(std::set<std::string>* frames) : frames_(frames) {}

  // Frames after a rank's Welcome carry the coordinator's epoch (CoordinatorLink::epoch_).
  void Send(int peer, wire::Frame frame, fuzz::Op op = fuzz::kFrameFlush, int advance = 0) {
    // The membership epoch the rank is in (CoordinatorLink::Stamp): 1 once welcomed.
    if (welcomed_.count(peer))
      frame.set_membership_epoch(membership_.count(peer) ? membership_[peer] : 1);
    const std::string bytes = wire::Encode(frame, welcomed_.count(peer) ? fuzz::kEpoch : 0);
    frames_->insert(bytes);
    fuzz::AppendFrame(&input_, peer, bytes, op, advance);
  }
  void Tick(int advance) { fuzz::AppendTick(&input_, advance); }

  // Runtime::Join: the registration of `rank` through routing id `peer`.
  void Register(int peer, int32_t rank, const RegisterArgs& args, const std::string& host = "hostA") {
    wire::Frame frame;
    auto* r = frame.mutable_register_();
    r->set_job(args.job);
    r->set_token(args.token);
    r->set_rank(rank);
    r->set_size(args.size);
    r->set_host(host);
    r->set_data_endpoint("10.0.0." + std::to_string(peer + 1) + ":4100" + std::to_string(rank));
    r->set_rendezvous_timeout_ms(args.rendezvous_timeout_ms);
    r->set_cache_capacity(args.cache_capacity);
    r->set_fusion_threshold(args.fusion_threshold);
    r->set_stall_warning_ms(0);
    r->set_stall_shutdown_ms(0);
    r->set_transport(args.transport);
    r->set_elastic(args.elastic);
    if (args.elastic) r->set_min_size(args.min_size);
    for (const auto& set : args.static_sets)
      r->add_static_sets()->mutable_ranks()->Add(set.begin(), set.end());
    Send(peer, std::move(frame));
    if (args.size == 1) welcomed_.insert(peer);  // alone: welcomed at once
  }
  // Registers peers 0..size-1 as ranks 0..size-1: the last one completes the rendezvous.
  // `hosts`: each rank's host identity (default: all on hostA).
  void Rendezvous(const RegisterArgs& args, const std::vector<std::string>& hosts = {}) {
    for (int32_t rank = 0; rank < args.size; ++rank)
      Register(rank, rank, args, hosts.empty() ? "hostA" : hosts[rank]);
    for (int32_t rank = 0; rank < args.size; ++rank) welcomed_.insert(rank);
  }

  // AnnounceCache::Drain: full specs of one set in one Announce.
  void Announce(int peer, int32_t set_id, const std::vector<wire::TensorSpec>& specs,
                fuzz::Op op = fuzz::kFrameFlush, uint64_t evictions_seen = 0) {
    wire::Frame frame;
    auto* set = frame.mutable_announce()->add_sets();
    set->set_set_id(set_id);
    set->set_evictions_seen(evictions_seen);
    for (const auto& spec : specs) *set->add_tensors() = spec;
    Send(peer, std::move(frame), op);
  }
  // The same tensors resubmitted unchanged: one bit per cache slot.
  void AnnounceCached(int peer, int32_t set_id, const std::vector<uint32_t>& slots,
                      uint64_t evictions_seen = 0) {
    wire::Frame frame;
    auto* set = frame.mutable_announce()->add_sets();
    set->set_set_id(set_id);
    set->set_evictions_seen(evictions_seen);
    uint32_t low = slots[0], high = slots[0];
    for (uint32_t s : slots) low = std::min(low, s), high = std::max(high, s);
    const uint32_t base = low / 8 * 8;
    std::string bitmap((high - base) / 8 + 1, '\0');
    for (uint32_t s : slots)
      bitmap[(s - base) / 8] = static_cast<char>(bitmap[(s - base) / 8] | (1 << ((s - base) % 8)));
    set->set_cached_base(base);
    set->set_cached(bitmap);
    Send(peer, std::move(frame));
  }
  // Both kinds in one set of one frame, as Drain writes them.
  void AnnounceMixed(int peer, int32_t set_id, const wire::TensorSpec& spec, uint32_t slot) {
    wire::Frame frame;
    auto* set = frame.mutable_announce()->add_sets();
    set->set_set_id(set_id);
    *set->add_tensors() = spec;
    set->set_cached_base(slot / 8 * 8);
    set->set_cached(std::string(1, static_cast<char>(1 << (slot % 8))));
    Send(peer, std::move(frame));
  }

  void SetAdd(int peer, uint64_t request_id, std::initializer_list<int32_t> ranks,
              int64_t timeout_ms = 60000) {
    wire::Frame frame;
    frame.mutable_set_add()->set_request_id(request_id);
    frame.mutable_set_add()->mutable_ranks()->Add(ranks.begin(), ranks.end());
    frame.mutable_set_add()->set_timeout_ms(timeout_ms);
    Send(peer, std::move(frame));
  }
  void SetRemove(int peer, uint64_t request_id, int32_t set_id, int64_t timeout_ms = 60000) {
    wire::Frame frame;
    frame.mutable_set_remove()->set_request_id(request_id);
    frame.mutable_set_remove()->set_set_id(set_id);
    frame.mutable_set_remove()->set_timeout_ms(timeout_ms);
    Send(peer, std::move(frame));
  }
  void Join(int peer, uint64_t request_id, int32_t set_id, int64_t timeout_ms = 60000) {
    wire::Frame frame;
    frame.mutable_join()->set_request_id(request_id);
    frame.mutable_join()->set_set_id(set_id);
    frame.mutable_join()->set_timeout_ms(timeout_ms);
    Send(peer, std::move(frame));
  }
  void Heartbeat(int peer, int advance = 0) {
    wire::Frame frame;
    frame.mutable_heartbeat();
    Send(peer, std::move(frame), fuzz::kFrameFlushTick, advance);
  }
  void CountersQuery(int peer, uint64_t request_id) {
    wire::Frame frame;
    frame.mutable_counters_query()->set_request_id(request_id);
    Send(peer, std::move(frame));
  }
  // The set's first member relays the NCCL unique id of a device group (client/comm_id_mailbox).
  void CommId(int peer, int32_t set_id, int32_t device_group, const std::string& id) {
    wire::Frame frame;
    frame.mutable_comm_id()->set_set_id(set_id);
    frame.mutable_comm_id()->set_device_group(device_group);
    frame.mutable_comm_id()->set_id(id);
    Send(peer, std::move(frame));
  }
  void Abort(int peer) {
    wire::Frame frame;
    frame.mutable_abort();
    Send(peer, std::move(frame));
  }
  void Bye(int peer) {
    wire::Frame frame;
    frame.mutable_bye();
    Send(peer, std::move(frame));
  }
  void ByeAll(int size) {
    for (int peer = 0; peer < size; ++peer) Bye(peer);
  }
  // After a rendezvous that Register() calls completed: `peer`'s frames carry the epoch.
  void Welcomed(int peer) { welcomed_.insert(peer); }
  // An elastic job re-formed and `peer` applied it: its frames carry `epoch`.
  void InEpoch(int peer, uint64_t epoch) { membership_[peer] = epoch; }
  // Runtime's lane: its data-plane connection to `rank` closed in `set_id`.
  void PeerReport(int peer, int32_t rank, int32_t set_id) {
    wire::Frame frame;
    frame.mutable_peer_report()->set_rank(rank);
    frame.mutable_peer_report()->set_set_id(set_id);
    Send(peer, std::move(frame));
  }
  // Runtime::AwaitEpoch at a boundary while ranks wait to join (docs/elastic.md).
  void AtBoundary(int peer) {
    wire::Frame frame;
    frame.mutable_at_boundary();
    Send(peer, std::move(frame));
  }
  // CoordinatorLink's echo of tuttid's probe.
  void ProbeEcho(int peer, uint64_t nonce) {
    wire::Frame frame;
    frame.mutable_probe()->set_nonce(nonce);
    Send(peer, std::move(frame));
  }

  const std::string& input() const { return input_; }

 private:
  std::set<std::string>* frames_;
  std::set<int> welcomed_;
  std::map<int, uint64_t> membership_;  // peers past membership epoch 1
  std::string input_;
};

// Each scenario, by name: the name is its file in the sequences directory.
using NamedScenarios = std::vector<std::pair<std::string, std::function<void(Scenario&)>>>;
// Collectives of every kind, fusion, the response cache, mismatches and device tensors.
NamedScenarios CollectiveScenarios();
// Rendezvous, process sets, joins, aborts, lost leases and stalls.
NamedScenarios MembershipAndFaultScenarios();

// The scenarios name collective kinds unqualified.
using wire::COLLECTIVE_ALLGATHER;
using wire::COLLECTIVE_ALLREDUCE;
using wire::COLLECTIVE_ALLTOALL;
using wire::COLLECTIVE_BARRIER;
using wire::COLLECTIVE_BROADCAST;
using wire::COLLECTIVE_REDUCESCATTER;

}  // namespace tutti::fuzz_seeds
