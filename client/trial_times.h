// Autotuned sets (docs/autotune.md): how long this rank's lanes spent executing each set's
// collectives under each recent measurement period of tuttid's tuner (Execute.tuning.trial), for
// the set's next announcement to report (SetTensors.executed). tuttid scores a trial by the
// members' own execution time, so it must hear the totals of exactly the collectives that ran
// with the trial's values.
//
// Threads: a set's lane records (after each collective, before completing its requests, so that
// the next announcement of a waiting caller already carries it); the coordinator link's I/O
// thread reports while it builds an Announce, under its own mutex. The mutex here is a leaf:
// nothing else is locked or called while it is held.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>

#include "proto/protocol.h"

namespace tutti::client {

class TrialTimes {
 public:
  void Record(int32_t set_id, uint32_t trial, uint64_t bytes, std::chrono::nanoseconds spent) {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<Totals>& set = sets_[set_id];
    if (set.empty() || set.back().trial != trial) {
      set.push_back(Totals{trial});
      // tuttid scores one period at a time and ignores ended ones: a few suffice.
      if (set.size() > kKept) set.pop_front();
    }
    Totals& totals = set.back();
    ++totals.collectives;
    totals.bytes += bytes;
    totals.execute_ns += static_cast<uint64_t>(std::max<int64_t>(spent.count(), 0));
    totals.changed = true;
  }

  // Adds to `out` the totals so far of the set's periods that changed since its last report.
  void Report(wire::SetTensors* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sets_.find(out->set_id());
    if (it == sets_.end()) return;
    for (Totals& totals : it->second) {
      if (!totals.changed) continue;
      wire::TrialExecution* executed = out->add_executed();
      executed->set_trial(totals.trial);
      executed->set_collectives(totals.collectives);
      executed->set_bytes(totals.bytes);
      executed->set_execute_ns(totals.execute_ns);
      totals.changed = false;
    }
  }

 private:
  static constexpr size_t kKept = 4;
  struct Totals {
    uint32_t trial = 0;
    uint64_t collectives = 0, bytes = 0, execute_ns = 0;
    bool changed = false;
  };
  std::mutex mu_;
  std::map<int32_t, std::deque<Totals>> sets_;
};

}  // namespace tutti::client
