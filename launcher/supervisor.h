// Supervises the started ranks until every one is reaped and its output forwarded: forwards their
// lines, turns tuttirun's signals into signals to the ranks (a second one kills them), and decides
// the job's exit status. A failing rank stops the others after a grace period, except in an
// elastic job (docs/elastic.md), which goes on without it up to its reset limit and fails when
// every rank failed; with host discovery it also starts and stops ranks as hosts come and go
// (Scaler). Main thread only.
#pragma once

#include <memory>
#include <vector>

#include "launcher/rank_process.h"
#include "launcher/scaler.h"

namespace tutti::launcher {

class Supervisor {
 public:
  // `wake_read_fd`: the pipe the signal handlers write signal numbers to. `reset_limit`: in an
  // elastic job, the rank failures the others survive (-1: any number). `scaler`: an elastic
  // job's host discovery, polled every Scaler::kInterval (may be null).
  Supervisor(std::vector<std::unique_ptr<RankProcess>>& ranks, int wake_read_fd, bool elastic,
             int reset_limit, Scaler* scaler = nullptr);
  ~Supervisor();

  // The first reason to stop decides the exit code; later ones only add urgency.
  void BeginStop(int exit_code, int sig);
  // Until every rank is reaped; returns the job's exit status.
  int Run();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tutti::launcher
