// Scenarios of the process-set tests (tests/multiproc/process_set_test.cc): static and added sets
// running beside the world, overlapping sets progressing independently, an add that only members
// wait for, and removal.
#include <tutti/tutti.h>

#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Static sets (TEST_STATIC_SETS="0,1;2,3") or added ones: each pair allreduces 20 times on its own
// set while every rank also allreduces on the world. Prints "sets ok".
int DisjointSets(bool added) {
  int32_t mine = -1;
  if (added) {
    int32_t low[] = {0, 1}, high[] = {2, 3}, id_low, id_high;
    Check("add low", tutti_process_set_add(rt, low, 2, 0, &id_low));
    Check("add high", tutti_process_set_add(rt, high, 2, 0, &id_high));
    mine = my_rank < 2 ? id_low : id_high;
  } else {
    mine = my_rank < 2 ? 1 : 2;
  }
  Say("set %d", mine);
  for (int i = 0; i < 20; ++i) {
    std::string set_name = "pair." + std::to_string(i), world_name = "world." + std::to_string(i);
    Tensor a(TUTTI_DTYPE_INT32, 5000, 4), b(TUTTI_DTYPE_INT32, 300, 4);
    for (int j = 0; j < 5000; ++j) a.as<int32_t>()[j] = my_rank * 1000 + j;
    for (int j = 0; j < 300; ++j) b.as<int32_t>()[j] = my_rank + i;
    tutti_request_t ra, rb;
    Check("submit pair", tutti_allreduce(rt, set_name.c_str(), mine, &a.desc, &a.desc, nullptr, &ra));
    Check("submit world", tutti_allreduce(rt, world_name.c_str(), TUTTI_WORLD, &b.desc, &b.desc, nullptr, &rb));
    Check("wait world", tutti_request_wait(rb, -1));
    Check("wait pair", tutti_request_wait(ra, -1));
    tutti_request_free(ra);
    tutti_request_free(rb);
    const int32_t base = my_rank < 2 ? 1 : 5;  // 0+1 or 2+3
    for (int j = 0; j < 5000; ++j)
      if (a.as<int32_t>()[j] != base * 1000 + 2 * j) return Say("fail pair %d", j), 1;
    for (int j = 0; j < 300; ++j)
      if (b.as<int32_t>()[j] != 6 + 4 * i) return Say("fail world %d", j), 1;
  }
  Say("sets ok");
  return 0;
}

// A={0,1,2}, B={1,2,3}. Rank 0 submits on A only after the harness says "go", which it does once
// ranks 1-3 printed "B 99" (their 100th B allreduce completed while their A request was pending).
int Independence() {
  int32_t a_ranks[] = {0, 1, 2}, b_ranks[] = {1, 2, 3}, a, b;
  Check("add A", tutti_process_set_add(rt, a_ranks, 3, 0, &a));
  Check("add B", tutti_process_set_add(rt, b_ranks, 3, 0, &b));
  Say("ready");
  Tensor ta(TUTTI_DTYPE_FLOAT32, 64, 4);
  for (int i = 0; i < 64; ++i) ta.as<float>()[i] = static_cast<float>(my_rank);
  tutti_request_t on_a = nullptr;
  if (my_rank == 0) AwaitGo();
  if (my_rank <= 2) Check("submit A", tutti_allreduce(rt, "a", a, &ta.desc, &ta.desc, nullptr, &on_a));
  if (my_rank >= 1) {
    for (int i = 0; i < 100; ++i) {
      SumOnSet(("b." + std::to_string(i)).c_str(), b, 16);
      Say("B %d", i);
      if (my_rank <= 2 && i == 99 && tutti_request_test(on_a) != TUTTI_IN_PROGRESS)
        return Say("fail: A completed before rank 0 submitted it"), 1;
    }
  }
  if (on_a) {
    Check("wait A", tutti_request_wait(on_a, -1));
    tutti_request_free(on_a);
    if (ta.as<float>()[0] != 3.0f) return Say("fail: A sum %f", ta.as<float>()[0]), 1;
    Say("A ok");
  }
  return 0;
}

// Ranks 0 and 1 add {0,1} and allreduce on it while 2 and 3 are stopped by the harness; then 2 and
// 3 add {0,1} as non-members and must get the same id. Prints "added <id>", "pair ok", "done".
int MembersOnlyAdd() {
  Say("ready");
  AwaitGo();
  int32_t pair[] = {0, 1}, id = -1;
  Check("add pair", tutti_process_set_add(rt, pair, 2, 0, &id));
  Say("added %d", id);
  if (my_rank < 2) {
    SumOnSet("pair", id);
    Say("pair ok");
    AwaitGo();
  }
  SumOnSet("final", TUTTI_WORLD);
  Say("done");
  return 0;
}

// S={0,2}: members allreduce, rank 0 leaves "orphan" pending, everyone removes S; then S's
// requests fail on members, and adding {0,2} again gives a new id; every rank removes each set,
// the members first and then, for the re-added set, the non-members first. Prints "removed <id>",
// "orphan <status> <message>", "after <status> <message>", "readded <id>".
int Remove() {
  int32_t s_ranks[] = {0, 2}, s = -1;
  Check("add S", tutti_process_set_add(rt, s_ranks, 2, 0, &s));
  // Everyone has added S before its members remove it: a non-member adding the rank list after
  // the removal would create a new set instead (ids are never reused).
  SumOnSet("added", TUTTI_WORLD);
  const bool member = my_rank == 0 || my_rank == 2;
  tutti_request_t orphan = nullptr;
  Tensor t(TUTTI_DTYPE_FLOAT32, 8, 4);
  if (member) {
    SumOnSet("on-s", s);
    if (my_rank == 0) Check("orphan", tutti_allreduce(rt, "orphan", s, &t.desc, &t.desc, nullptr, &orphan));
  } else {
    tutti_request_t request = nullptr;
    tutti_status_t status = tutti_allreduce(rt, "x", s, &t.desc, &t.desc, nullptr, &request);
    Say("nonmember %d %s", status, tutti_last_error());
  }
  // Every rank removes S, as Horovod's contract has them do. Here the members are first: a
  // non-member's removal after theirs still succeeds.
  if (member) Check("remove S", tutti_process_set_remove(rt, s, 0));
  SumOnSet("members-removed", TUTTI_WORLD);
  if (!member) Check("remove S after its members", tutti_process_set_remove(rt, s, 0));
  Say("removed %d", s);
  if (orphan) {
    tutti_status_t status = tutti_request_wait(orphan, -1);
    Say("orphan %d %s", status, tutti_last_error());
    tutti_request_free(orphan);
  }
  tutti_request_t request = nullptr;
  tutti_status_t status = tutti_allreduce(rt, "after", s, &t.desc, &t.desc, nullptr, &request);
  Say("after %d %s", status, tutti_last_error());
  status = tutti_process_set_remove(rt, s, 0);
  Say("remove again %d %s", status, tutti_last_error());
  SumOnSet("sync", TUTTI_WORLD);  // members finished removing before anyone re-adds
  int32_t again = -1;
  Check("re-add S", tutti_process_set_add(rt, s_ranks, 2, 0, &again));
  Say("readded %d", again);
  if (member) SumOnSet("on-new-s", again);
  // Now the non-members remove first, while the set is live: they do not wait for its members.
  if (!member) Check("remove S' before its members", tutti_process_set_remove(rt, again, 0));
  SumOnSet("nonmembers-removed", TUTTI_WORLD);
  if (member) Check("remove S'", tutti_process_set_remove(rt, again, 0));
  SumOnSet("final", TUTTI_WORLD);
  return 0;
}

const ScenarioRegistrar registered = {
    {"static_sets", [](const ScenarioArgs&) { return DisjointSets(false); }},
    {"added_sets", [](const ScenarioArgs&) { return DisjointSets(true); }},
    {"independence", Independence},
    {"members_only_add", MembersOnlyAdd},
    {"remove", Remove},
};

}  // namespace
}  // namespace worker
