#include "client/control/comm_id_mailbox.h"

namespace tutti::client {

void CommIdMailbox::Put(int32_t set_id, int32_t group, std::string id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids_[{set_id, group}] = std::move(id);
  }
  arrived_.notify_all();
}

Status CommIdMailbox::Take(int32_t set_id, int32_t group, gpu::Deadline deadline,
                           const gpu::Interrupt& interrupted, std::string* id) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto found = ids_.find({set_id, group});
    if (found != ids_.end()) {
      *id = std::move(found->second);
      ids_.erase(found);
      return Status::Ok();
    }
    if (interrupted) {
      Status stop = interrupted();
      if (!stop.ok()) return stop;
    }
    if (gpu::Clock::now() >= deadline)
      return Status(Code::kTimeout,
                    "the NCCL unique id of process set " + std::to_string(set_id) +
                        " (device group " + std::to_string(group) +
                        ") never arrived from its first member through tuttid");
    arrived_.wait_until(lock, std::min(deadline, gpu::Clock::now() + std::chrono::milliseconds(20)));
  }
}

void CommIdMailbox::DropSet(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = ids_.begin(); it != ids_.end();)
    it = it->first.first == set_id ? ids_.erase(it) : std::next(it);
}

}  // namespace tutti::client
