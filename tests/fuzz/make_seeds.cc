// Writes the seed corpora of the fuzz targets: real frames, filled and encoded the way the client
// runtime fills and encodes them (client/runtime.cc, client/coordinator_link.cc,
// client/announce_cache.cc), in sequences that make a real CoordinatorCore go somewhere: a
// rendezvous, collectives of every kind, process sets, fusion, the response cache, joins, faults.
//
//   make_seeds FRAMES_DIR SEQUENCES_DIR
//
// FRAMES_DIR gets every distinct frame alone (fuzz_client_frame), SEQUENCES_DIR one file per
// scenario in the record format of fuzz_records.h (fuzz_coordinator_core).
#include <cstdio>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "fuzz_records.h"
#include "proto/protocol.h"

namespace {

using namespace tutti;
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
};

// `spec` on GPU `index` whose 16-byte uuid is all `uuid` (0: the runtime gave none).
wire::TensorSpec OnGpu(wire::TensorSpec spec, int32_t index, char uuid) {
  spec.set_device_type(1);  // TUTTI_DEVICE_CUDA
  spec.set_device_index(index);
  if (uuid != 0) spec.set_device_uuid(std::string(16, uuid));
  return spec;
}

wire::TensorSpec Spec(const std::string& name, wire::CollectiveKind kind,
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

  const std::string& input() const { return input_; }

 private:
  std::set<std::string>* frames_;
  std::set<int> welcomed_;
  std::string input_;
};

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

using wire::COLLECTIVE_ALLGATHER;
using wire::COLLECTIVE_ALLREDUCE;
using wire::COLLECTIVE_ALLTOALL;
using wire::COLLECTIVE_BARRIER;
using wire::COLLECTIVE_BROADCAST;
using wire::COLLECTIVE_REDUCESCATTER;

// Each scenario, by name.
const std::vector<std::pair<std::string, std::function<void(Scenario&)>>> kScenarios = {
    // Two ranks meet, allreduce one gradient, submit it again from the response cache.
    {"allreduce_and_cache",
     [](Scenario& s) {
       s.Rendezvous({});
       const auto grad = Spec("grad.0", COLLECTIVE_ALLREDUCE, {1024});
       s.Announce(0, 0, {grad});
       s.Announce(1, 0, {grad});
       s.Heartbeat(0, 5);
       s.Heartbeat(1);
       s.AnnounceCached(0, 0, {0});
       s.AnnounceCached(1, 0, {0});
       s.CountersQuery(0, 1);
       s.ByeAll(2);
     }},
    // A dynamic set: its members add it, a non-member learns it at once, it runs, it goes away.
    {"process_set_add_remove",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       s.Rendezvous(args);
       s.SetAdd(0, 1, {0, 1});
       s.SetAdd(2, 1, {0, 1});
       s.SetAdd(1, 1, {1, 0});
       const auto t = Spec("layer.w", COLLECTIVE_ALLREDUCE, {16, 16});
       s.Announce(0, 1, {t});
       s.Announce(1, 1, {t});
       auto b = Spec("weights", COLLECTIVE_BROADCAST, {64});
       b.set_root(2);
       for (int peer = 0; peer < 3; ++peer) s.Announce(peer, 0, {b});
       s.SetRemove(1, 2, 1);
       s.SetRemove(0, 2, 1);
       s.SetAdd(0, 3, {0}, 1000);
       s.ByeAll(3);
     }},
    // A member joins a set that its members then remove.
    {"join_then_remove",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       s.Rendezvous(args);
       s.SetAdd(0, 1, {0, 1});
       s.SetAdd(1, 1, {0, 1});
       s.Join(0, 2, 1, 1000);
       s.SetRemove(1, 3, 1);
       s.SetRemove(0, 4, 1);
       for (int i = 0; i < 2; ++i)
         for (int peer = 0; peer < 3; ++peer) s.Heartbeat(peer, peer == 0 ? 7 : 0);
       s.ByeAll(3);
     }},
    // Static sets from the registration; every collective kind on them.
    {"static_sets_all_kinds",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       args.static_sets = {{0, 1}, {1, 2}};
       s.Rendezvous(args);
       s.Announce(0, 1, {Spec("gather", COLLECTIVE_ALLGATHER, {3, 4})});
       s.Announce(1, 1, {Spec("gather", COLLECTIVE_ALLGATHER, {5, 4})});
       auto a1 = Spec("shuffle", COLLECTIVE_ALLTOALL, {6, 2}, DType::kInt64);
       for (int64_t split : {2, 4}) a1.add_splits(split);
       auto a2 = Spec("shuffle", COLLECTIVE_ALLTOALL, {3, 2}, DType::kInt64);
       for (int64_t split : {1, 2}) a2.add_splits(split);
       s.Announce(1, 2, {a1});
       s.Announce(2, 2, {a2});
       for (int peer = 0; peer < 3; ++peer) {
         s.Announce(peer, 0, {Spec("scatter", COLLECTIVE_REDUCESCATTER, {9, 3}, DType::kFloat16)});
         s.Announce(peer, 0, {Spec("barrier.0", COLLECTIVE_BARRIER, {})});
       }
       s.ByeAll(3);
     }},
    // Many small tensors released together fuse; a grouped allreduce leaves whole; priorities.
    {"fusion_groups_priorities",
     [](Scenario& s) {
       RegisterArgs args;
       args.fusion_threshold = 4096;
       s.Rendezvous(args);
       std::vector<wire::TensorSpec> specs;
       for (int i = 0; i < 6; ++i) {
         specs.push_back(Spec("bias." + std::to_string(i), COLLECTIVE_ALLREDUCE, {100}));
         specs.back().set_priority(i % 3);
       }
       specs.push_back(Spec("big", COLLECTIVE_ALLREDUCE, {4096}));
       for (int i = 0; i < 2; ++i) {
         auto g = Spec("grouped_allreduce.0[" + std::to_string(i) + "]", COLLECTIVE_ALLREDUCE, {8},
                       DType::kBFloat16);
         g.set_group("grouped_allreduce.0");
         g.set_group_size(2);
         g.set_group_index(i);
         specs.push_back(g);
       }
       s.Announce(0, 0, specs, fuzz::kFrame);
       s.Announce(1, 0, specs, fuzz::kFrame);
       s.Tick(0);
       s.AnnounceMixed(0, 0, Spec("late", COLLECTIVE_ALLGATHER, {2}), 0);
       s.AnnounceMixed(1, 0, Spec("late", COLLECTIVE_ALLGATHER, {3}), 0);
       s.ByeAll(2);
     }},
    // Join: a rank out of data; the other's allreduce completes without it; then everyone joins.
    {"join",
     [](Scenario& s) {
       s.Rendezvous({});
       s.Announce(0, 0, {Spec("step.7", COLLECTIVE_ALLREDUCE, {32})});
       s.Join(1, 5, 0);
       s.Announce(0, 0, {Spec("gather.7", COLLECTIVE_ALLGATHER, {2, 2})});
       s.Join(0, 9, 0);
       s.Join(1, 6, 0, 1000);
       s.Tick(9);
       s.ByeAll(2);
     }},
    // One rank aborts: the other hears a fault, its pending tensor fails, later frames are stale.
    {"abort",
     [](Scenario& s) {
       s.Rendezvous({});
       s.Announce(1, 0, {Spec("pending", COLLECTIVE_ALLREDUCE, {4})});
       s.SetAdd(1, 2, {0, 1});
       s.Abort(0);
       s.Heartbeat(0);
       s.Heartbeat(1);
       s.Bye(1);
     }},
    // Every rank of a job aborts, the last one alone.
    {"everyone_aborts",
     [](Scenario& s) {
       RegisterArgs solo;
       solo.job = "solo";
       solo.size = 1;
       s.Register(3, 0, solo);
       s.Rendezvous({});
       s.Abort(3);
       s.Abort(1);
       s.Abort(0);
       s.Heartbeat(3);
     }},
    // A silent rank loses its lease; what it says afterwards is answered as evicted.
    {"lease_expiry",
     [](Scenario& s) {
       s.Rendezvous({});
       s.Join(1, 3, 0);
       for (int i = 0; i < 4; ++i) s.Heartbeat(0, 7);  // 500 ms apart: rank 1 goes silent
       s.Heartbeat(1);
       s.Announce(0, 0, {Spec("after", COLLECTIVE_ALLREDUCE, {4})});
       s.Bye(0);
     }},
    // A tensor only one member submits: warned about, then failed by the stall inspector.
    {"stall",
     [](Scenario& s) {
       RegisterArgs args;
       s.Rendezvous(args);
       s.Announce(0, 0, {Spec("slow", COLLECTIVE_ALLREDUCE, {4})});
       for (int i = 0; i < 12; ++i) {
         s.Heartbeat(0, 7);
         s.Heartbeat(1);
       }
       s.Announce(1, 0, {Spec("slow", COLLECTIVE_ALLREDUCE, {4})});
       s.ByeAll(2);
     }},
    // Disagreements: shapes, dtypes, a broadcast root outside the set, splits of the wrong length.
    {"mismatches",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       s.Rendezvous(args);
       s.SetAdd(0, 1, {0, 2});
       s.SetAdd(2, 1, {0, 2});
       s.Announce(0, 1, {Spec("m", COLLECTIVE_ALLREDUCE, {4})});
       s.Announce(2, 1, {Spec("m", COLLECTIVE_ALLREDUCE, {5})});
       s.Announce(0, 1, {Spec("d", COLLECTIVE_ALLREDUCE, {4}, DType::kFloat64)});
       s.Announce(2, 1, {Spec("d", COLLECTIVE_ALLREDUCE, {4}, DType::kInt32)});
       auto b = Spec("b", COLLECTIVE_BROADCAST, {4});
       b.set_root(1);
       s.Announce(0, 1, {b});
       s.Announce(2, 1, {b});
       auto a = Spec("a", COLLECTIVE_ALLTOALL, {4});
       a.add_splits(4);
       s.Announce(0, 1, {a});
       s.Announce(2, 1, {a});
       s.Announce(1, 1, {Spec("outsider", COLLECTIVE_ALLREDUCE, {4})});
       s.Announce(1, 7, {Spec("nowhere", COLLECTIVE_ALLREDUCE, {4})});
       s.Announce(0, 0, {Spec("twice", COLLECTIVE_ALLREDUCE, {4})});
       s.Announce(0, 0, {Spec("twice", COLLECTIVE_ALLREDUCE, {4})});
       s.ByeAll(3);
     }},
    // Registrations that fail: a wrong token, a wrong size, a rank taken twice, then a timeout.
    {"rendezvous_failures",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       args.rendezvous_timeout_ms = 2000;
       s.Register(0, 0, args);
       RegisterArgs wrong = args;
       wrong.token = "guess";
       s.Register(1, 1, wrong);
       wrong = args;
       wrong.size = 4;
       s.Register(2, 1, wrong);
       s.Register(3, 0, args);
       s.Tick(9);
       s.Register(1, 1, args);
     }},
    // Ranks disagree at the rendezvous: static sets, then transports.
    {"rendezvous_disagreement",
     [](Scenario& s) {
       RegisterArgs a;
       a.static_sets = {{0, 1}};
       RegisterArgs b = a;
       b.static_sets = {{1}};
       s.Register(0, 0, a);
       s.Register(1, 1, b);
       a.job = b.job = "other";
       b.static_sets = a.static_sets;
       b.transport = "tcp";
       s.Register(2, 0, a);
       s.Register(3, 1, b);
     }},
    // Several jobs at once on one tuttid, one of them a single rank on its own host.
    {"two_jobs",
     [](Scenario& s) {
       RegisterArgs solo;
       solo.job = "solo";
       solo.size = 1;
       s.Register(3, 0, solo, "hostB");
       RegisterArgs pair;
       pair.job = "pair";
       s.Register(1, 1, pair, "hostA");
       s.Register(2, 0, pair, "hostB");
       wire::Frame early;
       early.mutable_heartbeat();
       s.Send(0, early);  // registers nothing first
       s.Send(3, early, fuzz::kFrameFlushTick);
       s.Bye(3);
     }},
    // GPU tensors: own GPUs (NCCL) with the first member relaying the NCCL unique id, then a
    // shared GPU, a host member and a joined one (staged); CommIds the job refuses.
    {"device_paths_and_comm_id",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       s.Rendezvous(args, {"hostA", "hostA", "hostB"});
       const auto g = Spec("grad.w", COLLECTIVE_ALLREDUCE, {256});
       s.Announce(0, 0, {OnGpu(g, 0, 'a')}, fuzz::kFrame);
       s.Announce(1, 0, {OnGpu(g, 1, 'b')}, fuzz::kFrame);
       s.Announce(2, 0, {OnGpu(g, 0, 'a')});
       s.CommId(0, 0, 0, std::string(128, '\x5a'));
       s.CommId(1, 0, 0, std::string(128, '\x5a'));  // not the first member
       s.CommId(0, 0, -1, "x");
       s.CommId(0, 0, 7, "x");
       s.CommId(0, 9, 0, "x");
       s.CommId(0, 0, 0, std::string(513, 'x'));
       const auto b = Spec("grad.b", COLLECTIVE_ALLREDUCE, {16});
       s.Announce(0, 0, {OnGpu(b, 0, 'a')});
       s.Announce(1, 0, {OnGpu(b, 0, 'a')});  // rank 0's GPU
       s.Announce(2, 0, {b});                   // host memory
       s.Join(2, 4, 0);
       s.Announce(0, 0, {OnGpu(Spec("late", COLLECTIVE_ALLREDUCE, {8}), 0, 0)});
       s.Announce(1, 0, {OnGpu(Spec("late", COLLECTIVE_ALLREDUCE, {8}), 0, 0)});
       s.ByeAll(3);
     }},
    // A tiny response cache: tensors take turns in one slot, evictions are acknowledged.
    {"cache_eviction",
     [](Scenario& s) {
       RegisterArgs args;
       args.cache_capacity = 1;
       s.Rendezvous(args);
       const auto x = Spec("x", COLLECTIVE_ALLREDUCE, {4});
       const auto y = Spec("y", COLLECTIVE_ALLREDUCE, {4});
       s.Announce(0, 0, {x});
       s.Announce(1, 0, {x});
       s.Announce(0, 0, {y});
       s.Announce(1, 0, {y});
       s.AnnounceCached(0, 0, {0});
       s.AnnounceCached(1, 0, {0});
       s.Announce(0, 0, {y}, fuzz::kFrameFlush, 1);
       s.Announce(1, 0, {y}, fuzz::kFrameFlush, 1);
       auto changed = Spec("x", COLLECTIVE_ALLREDUCE, {8});
       s.Announce(0, 0, {changed}, fuzz::kFrameFlush, 1);
       s.Announce(1, 0, {changed}, fuzz::kFrameFlush, 1);
       s.ByeAll(2);
     }},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FRAMES_DIR SEQUENCES_DIR\n", argv[0]);
    return 2;
  }
  const std::string frames_dir = argv[1], sequences_dir = argv[2];
  std::set<std::string> frames;
  for (const auto& [name, build] : kScenarios) {
    Scenario scenario(&frames);
    build(scenario);
    if (!WriteFile(sequences_dir + "/" + name, scenario.input())) return 1;
  }
  int index = 0;
  for (const std::string& frame : frames) {
    char name[32];
    snprintf(name, sizeof(name), "/frame-%03d", index++);
    if (!WriteFile(frames_dir + name, frame)) return 1;
  }
  printf("make_seeds: %zu sequences in %s, %zu frames in %s\n", kScenarios.size(),
         sequences_dir.c_str(), frames.size(), frames_dir.c_str());
  return 0;
}
