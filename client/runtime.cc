#include "client/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "transport/handshake.h"
#include "transport/message_pipe.h"
#include "transport/route_planner.h"

namespace tutti::client {
namespace {

std::chrono::milliseconds Ms(int64_t ms) { return std::chrono::milliseconds(ms); }

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// The generation of each job this process last joined (docs/lifecycle.md): an init after
// finalize tells tuttid, which puts the rank into the next generation. Process-wide, since
// runtimes come and go.
class MembershipMemory {
 public:
  static uint64_t Last(const std::string& job) {
    std::lock_guard<std::mutex> lock(mu());
    auto it = epochs().find(job);
    return it == epochs().end() ? 0 : it->second;
  }
  static void Joined(const std::string& job, uint64_t membership_epoch) {
    std::lock_guard<std::mutex> lock(mu());
    epochs()[job] = membership_epoch;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, uint64_t>& epochs() {
    static std::map<std::string, uint64_t> e;
    return e;
  }
};

}  // namespace

Runtime::Runtime(const RuntimeOptions& options)
    : options_(options),
      timeline_(options.rank, "rank " + std::to_string(options.rank)),
      sets_(options.rank),
      world_(options.size, 0, {}),
      owner_(getpid()) {}

Status Runtime::Create(const RuntimeOptions& options, std::unique_ptr<Runtime>* runtime) {
  std::unique_ptr<Runtime> created(new Runtime(options));
  TUTTI_RETURN_IF_ERROR(created->Rendezvous());
  *runtime = std::move(created);
  return Status::Ok();
}

Status Runtime::Rendezvous() {
  // TUTTI_TRANSPORT=mpi: the bytes travel through MPI mode's carrier, refused before anything
  // else where there is none, so that every rank fails alike without meeting the coordinator.
  std::unique_ptr<transport::MessageCarrier> carrier;
  TUTTI_RETURN_IF_ERROR(transport::OpenCarrier(options_.transport, &carrier));
  TUTTI_RETURN_IF_ERROR(
      transport::CreateDevice(options_.data_address, &device_, std::move(carrier)));
  try {
    LinkListener* listener = this;  // a private base: converted here, where it is accessible
    link_ = std::make_unique<CoordinatorLink>(options_.coordinator, listener, &counters_,
                                              options_.cycle_time, options_.curve);
  } catch (const zmq::error_t& e) {
    return Invalid("cannot use coordinator endpoint '" + options_.coordinator + "': " + e.what());
  }

  wire::Register request;
  request.set_job(options_.job);
  request.set_token(options_.token);
  request.set_rank(options_.rank);
  request.set_size(options_.size);
  request.set_host(options_.host_id);
  request.set_data_endpoint(device_->endpoint());
  request.set_rendezvous_timeout_ms(options_.timeout_ms);
  request.set_cache_capacity(options_.cache_capacity);
  request.set_fusion_threshold(options_.fusion_threshold);
  request.set_no_fast_path(!options_.fast_path);
  request.set_autotune(options_.autotune);
  request.set_fusion_threshold_pinned(options_.fusion_threshold_pinned);
  request.set_small_allreduce_bytes(options_.small_allreduce_bytes);
  request.set_pipeline_bytes(options_.pipeline_bytes);
  request.set_stall_warning_ms(options_.stall_warning_ms);
  request.set_stall_shutdown_ms(options_.stall_shutdown_ms);
  request.set_transport(options_.transport);
  request.set_data_security(transport::DataSecurityName(options_.data_security));
  request.set_last_membership_epoch(MembershipMemory::Last(options_.job));
  request.set_elastic(options_.elastic.on);
  request.set_min_size(options_.elastic.min_size);
  request.set_max_size(options_.elastic.max_size);
  request.set_elastic_timeout_ms(options_.elastic.timeout_ms);
  if (!options_.timeline.empty())
    TUTTI_RETURN_IF_ERROR(timeline_.Start(RankTimelinePath(options_.timeline, options_.rank)));
  TUTTI_RETURN_IF_ERROR(autotune_log_.Open(options_.autotune_log));
  for (const auto& set : options_.static_sets)
    request.add_static_sets()->mutable_ranks()->Add(set.begin(), set.end());
  TUTTI_RETURN_IF_ERROR(link_->Register(request, &welcome_));
  MembershipMemory::Joined(options_.job, welcome_.membership_epoch());
  // A rank added to a running elastic job learns its slot and the live ones (docs/elastic.md).
  const bool added = welcome_.members_size() > 0;
  slot_ = added ? welcome_.slot() : options_.rank;
  sets_.SetSelf(slot_);
  std::vector<int32_t> world(welcome_.members().begin(), welcome_.members().end());
  if (!added)
    for (int32_t r = 0; r < options_.size; ++r) world.push_back(r);
  world_.Reform(world, welcome_.membership_epoch(),
                {welcome_.local_rank(), welcome_.local_size(), welcome_.cross_rank(),
                 welcome_.cross_size()});

  if (welcome_.job_secret().size() != transport::kJobSecretBytes)
    return Status(Code::kVersionMismatch,
                  "tuttid sent no data-plane secret: it is older than this library (0.3); "
                  "upgrade tuttid");
  device_->SetJobSecret(welcome_.job_secret(), slot_, options_.data_security);
  for (const auto& peer : welcome_.peers())
    peers_.push_back({peer.rank(), peer.data_endpoint(), peer.host()});
  TUTTI_RETURN_IF_ERROR(transport::PlanRoutes(slot_, options_.host_id, peers_,
                                              options_.transport, &routes_));
  p2p_ = std::make_unique<PointToPoint>(device_.get(), slot_, options_.host_id, routes_,
                                        Ms(options_.timeout_ms));
  // A lane opens before its set becomes visible: once it is, a submission on it may be answered.
  // The world of an added rank is the incarnation the others opened at the same epoch.
  int32_t world_channel = 0;
  if (added) TUTTI_RETURN_IF_ERROR(ChannelOf(0, welcome_.membership_epoch(), &world_channel));
  OpenLane(0, world, world_channel, welcome_.membership_epoch());
  sets_.Insert(0, world);
  for (const auto& set : welcome_.static_sets()) {
    std::vector<int32_t> ranks(set.ranks().begin(), set.ranks().end());
    if (std::binary_search(ranks.begin(), ranks.end(), slot_))
      OpenLane(set.id(), ranks, set.id(), welcome_.membership_epoch());
    sets_.Insert(set.id(), ranks);
  }
  // An added rank is a member of none of the sets that exist (they never grow).
  for (const auto& set : welcome_.sets())
    sets_.Insert(set.id(), {set.ranks().begin(), set.ranks().end()});
  // Only now may what tuttid said since the Welcome (a re-formation, a lost rank) act on the
  // lanes, routes and point-to-point built above; it waited on the link's I/O thread.
  link_->ListenerReady();
  return Status::Ok();
}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
  }
  // Order matters: stop hearing from the coordinator, unblock lanes stuck in the data plane, join
  // them, then fail whatever never reached a lane.
  // Stop first: the link's thread may be in a callback that uses link_ (see Stop()).
  if (link_) link_->Stop();
  {
    std::lock_guard<std::mutex> lock(link_mu_);  // a lane may be relaying an NCCL id
    link_.reset();
  }
  if (device_) device_->Shutdown();
  std::map<int32_t, std::unique_ptr<Lane>> lanes;
  std::vector<std::unique_ptr<Lane>> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes.swap(lanes_);
    retired.swap(retired_lanes_);
  }
  for (auto& lane : retired) lane->Interrupt(Status(Code::kShutDown, "the runtime is shutting down"));
  retired.clear();
  // Device waits do not go through the transport device: stop them too.
  for (auto& [id, lane] : lanes) lane->Interrupt(Status(Code::kShutDown, "the runtime is shutting down"));
  lanes.clear();
  p2p_.reset();
  std::vector<int32_t> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sets = pending_.sets();
  }
  for (int32_t id : sets)
    FailPending(id, Status(Code::kShutDown, "the runtime was finalized while the request was pending"));
}

Status Runtime::PeerStats(int32_t set_id, int32_t peer, transport::PeerStats* stats) {
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &members));
  if (!std::binary_search(members.begin(), members.end(), slot_))
    return Status(Code::kNotAMember, "rank " + std::to_string(rank()) +
                                         " is not a member of process set " + std::to_string(set_id));
  const int32_t peer_slot = world_.SlotOf(peer);
  if (peer_slot < 0 || peer_slot == slot_ ||
      !std::binary_search(members.begin(), members.end(), peer_slot))
    return Invalid("rank " + std::to_string(peer) + " is not another member of process set " +
                   std::to_string(set_id));
  peer = peer_slot;
  std::lock_guard<std::mutex> lock(mu_);
  auto lane = lanes_.find(set_id);
  if (lane == lanes_.end()) return Status(Code::kUnknownSet, "process set " + std::to_string(set_id) + " has no lane");
  *stats = lane->second->PeerStats(peer);
  return Status::Ok();
}

void Runtime::OpenLane(int32_t set_id, const std::vector<int32_t>& ranks, int32_t channel,
                       uint64_t incarnation_epoch) {
  Lane::CommIdRelay relay{
      [this, set_id](int32_t group, const std::string& id) {
        std::lock_guard<std::mutex> lock(link_mu_);
        if (link_) link_->SendCommId(set_id, group, id);
      },
      [this, set_id](int32_t group, gpu::Deadline deadline, const gpu::Interrupt& interrupted,
                     std::string* id) {
        return comm_ids_.Take(set_id, group, deadline, interrupted, id);
      }};
  // A data-plane connection that closed under a collective is reported, so that tuttid finds out
  // at once whether the peer died (docs/elastic.md, "Detection"); one whose record failed
  // authentication too, so that the set fails on every member (docs/security.md).
  auto report_closed = [this, set_id, incarnation_epoch](int32_t peer, bool integrity) {
    std::lock_guard<std::mutex> lock(link_mu_);
    if (link_) link_->SendPeerReport(set_id, peer, incarnation_epoch, integrity);
  };
  std::vector<transport::PeerRoute> routes;
  SetCounters* set_counters = nullptr;
  std::vector<std::string> hosts;  // by slot, as tuttid told every rank
  {
    std::lock_guard<std::mutex> lock(mu_);
    routes = routes_;
    set_counters = SetCountersOf(set_id);
    for (const auto& peer : peers_) hosts.push_back(peer.host);
  }
  SetTopology topology = TopologyOf(MemberList(ranks), hosts, options_.hierarchical,
                                    static_cast<size_t>(options_.hierarchical_min_bytes));
  // A tensor waits on the fast path for a second at most, less with a short stall warning, before
  // tuttid's stall inspector takes over (docs/steady-state.md).
  auto patience = std::chrono::milliseconds(1000);
  if (options_.stall_warning_ms > 0)
    patience = std::min(patience, std::chrono::milliseconds(std::max<int64_t>(options_.stall_warning_ms / 2, 1)));
  auto lane = std::make_unique<Lane>(set_id, ranks, slot_,
                                     device_->CreateContext(channel, slot_, std::move(routes)),
                                     Ms(options_.timeout_ms), &counters_, set_counters, &timeline_,
                                     std::move(relay),
                                     std::move(report_closed), static_cast<FastPathPort*>(this), patience,
                                     std::move(topology));
  std::lock_guard<std::mutex> lock(mu_);
  lanes_[set_id] = std::move(lane);
}

SetCounters* Runtime::SetCountersOf(int32_t set_id) {
  auto& counters = set_counters_[set_id];
  if (!counters) counters = std::make_unique<SetCounters>();
  return counters.get();
}

Status Runtime::GetSetCounters(int32_t set_id, SetCountersSnapshot* snapshot) {
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &members));
  if (!std::binary_search(members.begin(), members.end(), slot_))
    return Status(Code::kNotAMember, "rank " + std::to_string(rank()) +
                                         " is not a member of process set " + std::to_string(set_id));
  std::lock_guard<std::mutex> lock(mu_);
  *snapshot = SetCountersSnapshot{};
  auto it = set_counters_.find(set_id);
  if (it == set_counters_.end()) return Status::Ok();
  const SetCounters& c = *it->second;
  *snapshot = {c.collectives.load(), c.tensors.load(), c.tensors_fused.load(), c.bytes.load(),
               c.wait_ns.load(), c.execute_ns.load(),
               c.tensors_compressed.load(), c.adaptive_revisits.load(),
               c.adaptive_compress_choices.load()};
  return Status::Ok();
}

void Runtime::Abort() {
  // Peers first: they learn it from tuttid while this rank unwinds.
  link_->SendAbort();
  FailEverything(Status(Code::kAborted, "aborted: this rank called tutti_abort"));
}

void Runtime::RememberMembershipEpoch(uint64_t epoch) { MembershipMemory::Joined(options_.job, epoch); }

int32_t Runtime::RankForUser(int32_t slot) const {
  const int32_t rank = world_.RankOf(slot);
  return rank >= 0 ? rank : slot;
}

Status Runtime::QueryCoordinatorCounters(wire::CoordinatorCounters* counters, int32_t set_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  return link_->QueryCounters(transport::Clock::now() + Ms(options_.timeout_ms), counters, set_id);
}

}  // namespace tutti::client
