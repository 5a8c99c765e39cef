// Seed scenarios about who takes part: process sets added and removed, joins, aborts, lost leases,
// stalls, rendezvous failures and disagreements, and several jobs on one tuttid.
#include "seed_scenario.h"

namespace tutti::fuzz_seeds {

NamedScenarios MembershipAndFaultScenarios() {
  return {
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
    // Generations: rank 0 finalizes and registers again (new routing id) into membership epoch
    // 2 while rank 1 still runs in epoch 1; then rank 1 follows and epoch 2 runs its own set 1.
    {"reinit_generations",
     [](Scenario& s) {
       RegisterArgs args;
       args.static_sets = {{1}};
       s.Rendezvous(args);
       s.Bye(0);
       RegisterArgs next;
       next.static_sets = {{0}};
       s.Register(2, 0, next);
       s.Announce(1, 1, {Spec("still.epoch1", COLLECTIVE_ALLREDUCE, {8})});
       s.Bye(1);
       s.Register(3, 1, next);
       s.Welcomed(2);
       s.Welcomed(3);
       s.Announce(2, 1, {Spec("epoch2", COLLECTIVE_ALLREDUCE, {8})});
       s.Announce(3, 0, {Spec("world2", COLLECTIVE_ALLREDUCE, {8})});
       s.Announce(2, 0, {Spec("world2", COLLECTIVE_ALLREDUCE, {8})});
       s.Bye(2);
       s.Bye(3);
     }},
    // Elastic: rank 2 of 3 aborts and the job re-forms into epoch 2; rank 0's announcement on
    // set 2 from epoch 1 is stale, set 1 (without rank 2) is untouched; then rank 0 reports its
    // data-plane connection to rank 1 closed and rank 1 echoes the probe: set 1 alone breaks.
    {"elastic_reform",
     [](Scenario& s) {
       RegisterArgs args;
       args.size = 3;
       args.elastic = true;
       args.static_sets = {{0, 1}, {1, 2}};
       s.Rendezvous(args);
       s.Announce(0, 0, {Spec("pending", COLLECTIVE_ALLREDUCE, {8})});
       s.Announce(0, 1, {Spec("set1.before", COLLECTIVE_ALLREDUCE, {8})});
       s.Abort(2);
       s.Announce(1, 2, {Spec("stale", COLLECTIVE_ALLREDUCE, {4})});
       s.Announce(1, 1, {Spec("set1.before", COLLECTIVE_ALLREDUCE, {8})});
       s.InEpoch(0, 2);
       s.InEpoch(1, 2);
       s.Announce(0, 0, {Spec("world.e2", COLLECTIVE_ALLREDUCE, {8})});
       s.Announce(1, 0, {Spec("world.e2", COLLECTIVE_ALLREDUCE, {8})});
       s.SetAdd(0, 7, {0, 1});
       s.PeerReport(0, 1, 1);
       s.ProbeEcho(1, 1);
       s.Tick(100);
       s.ByeAll(2);
     }},
    // Elastic growth: a rank asks to join before the rendezvous completed (launcher number 5),
    // another after; both are admitted once ranks 0 and 1 are at a boundary (one boundary of an
    // earlier epoch does not count), and the grown world reduces; a third asks and gives up.
    {"elastic_grow",
     [](Scenario& s) {
       RegisterArgs args;
       args.elastic = true;
       s.Register(2, 5, args);
       s.Rendezvous(args);
       s.Register(3, 6, args);
       s.Announce(0, 0, {Spec("before", COLLECTIVE_ALLREDUCE, {8})});
       s.Announce(1, 0, {Spec("before", COLLECTIVE_ALLREDUCE, {8})});
       s.InEpoch(1, 0);
       s.AtBoundary(1);
       s.InEpoch(1, 1);
       s.AtBoundary(0);
       s.AtBoundary(1);
       for (int peer = 0; peer < 4; ++peer) {
         s.Welcomed(peer);
         s.InEpoch(peer, 2);
       }
       for (int peer = 0; peer < 4; ++peer)
         s.Announce(peer, 0, {Spec("grown", COLLECTIVE_ALLREDUCE, {8})});
       s.Register(4, 7, args);
       s.Tick(100000);
       s.ByeAll(4);
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
  };
}

}  // namespace tutti::fuzz_seeds
