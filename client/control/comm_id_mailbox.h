// NCCL unique ids relayed by tuttid (wire::CommId), kept until the set's lane asks for them. The
// coordinator link's I/O thread puts; lanes take, waiting with a deadline. Thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "gpu/module_api.h"

namespace tutti::client {

class CommIdMailbox {
 public:
  void Put(int32_t set_id, int32_t group, std::string id);
  // The id of (set, group) once it arrived; kTimeout at `deadline`, or the interrupt's status
  // (polled every few milliseconds) if that fires first.
  Status Take(int32_t set_id, int32_t group, gpu::Deadline deadline,
              const gpu::Interrupt& interrupted, std::string* id);
  void DropSet(int32_t set_id);

 private:
  std::mutex mu_;
  std::condition_variable arrived_;
  std::map<std::pair<int32_t, int32_t>, std::string> ids_;
};

}  // namespace tutti::client
