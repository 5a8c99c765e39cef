// TUTTI_AUTOTUNE_LOG (HOROVOD_AUTOTUNE_LOG): the trials of each autotuned set this rank is the
// first member of, as CSV rows, with the values the set converged on (docs/autotune.md). tuttid
// scores the trials; each Execute of a tuned set carries those that ended since the previous one
// (wire::Tuning.ended), so the log needs no call to tuttid.
//
// Several ranks of a host may write one file (each the sets it is first in): the file is opened
// once, for appending, and each write of rows holds an exclusive flock, under which the header
// goes first into an empty file.
//
// Threads: Write runs on the coordinator link's I/O thread (Runtime::OnExecute), at most once per
// trial of a set, seconds apart; Open on the thread that initializes the runtime.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "transport/fd_io.h"
#include "tutti.pb.h"

namespace tutti::client {

class AutotuneLog {
 public:
  // Opens `path` for appending (creating it), so that a wrong path fails init rather than the
  // first trial. An empty path: no log.
  Status Open(const std::string& path);
  bool on() const { return static_cast<bool>(file_); }
  // The rows of `tuning.ended` for set `set_id`, then the chosen values if the search converged.
  // A failed write is logged once as a warning; the job goes on.
  void Write(int32_t set_id, const wire::Tuning& tuning);

  static const char* Header();

 private:
  std::string path_;
  transport::UniqueFd file_;
  bool warned_ = false;
};

}  // namespace tutti::client
