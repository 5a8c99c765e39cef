// Seed scenarios about collectives: allreduce and the response cache, every kind on static sets,
// fusion with groups and priorities, mismatches, device tensors with the NCCL id relay, and cache
// evictions.
#include "seed_scenario.h"

namespace tutti::fuzz_seeds {

NamedScenarios CollectiveScenarios() {
  return {
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
}

}  // namespace tutti::fuzz_seeds
