// The NCCL unique-id relay: a set's first member generates the id of each of the set's device
// groups, and tuttid hands it on to the other members unchanged. Apart because it is the one frame
// tuttid relays rather than answers, and must stay a relay: nothing here may start keeping ids.
// Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <fmt/format.h>

#include "server/core/message_codec.h"

namespace tutti::server {

void Job::CommId(int32_t rank, const wire::CommId& msg, Outbox* out) {
  const int32_t set_id = msg.set_id();
  auto it = negotiators_.find(set_id);
  Status status;
  if (it == negotiators_.end()) {
    const std::vector<int32_t>* unused = nullptr;
    status = sets_.Members(set_id, &unused);
    status = Status(Code::kUnknownSet, fmt::format("cannot relay rank {}'s NCCL unique id: {}", rank,
                                                   status.ok() ? "no such set" : status.message()));
  } else if (const Negotiator& set = it->second; !set.contains(rank)) {
    status = Status(Code::kNotAMember,
                    fmt::format("rank {} sent the NCCL unique id of process set {}, which it is "
                                "not a member of",
                                rank, set_id));
  } else if (set.members().front() != rank) {
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent the NCCL unique id of process set {}, but only its "
                                "first member (rank {}) generates it",
                                rank, set_id, set.members().front()));
  } else if (msg.device_group() < 0 ||
             static_cast<size_t>(msg.device_group()) >= set.device_groups()) {
    // Groups are numbered when a collective first runs on them, before any member hears of it.
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent the NCCL unique id of device group {} of process set "
                                "{}, {}",
                                rank, msg.device_group(), set_id,
                                set.device_groups() == 0
                                    ? std::string("which has no device groups yet")
                                    : fmt::format("which has device groups 0 to {}",
                                                  set.device_groups() - 1)));
  } else if (msg.id().empty() || msg.id().size() > kMaxCommIdBytes) {
    status = Status(Code::kInvalidArgument,
                    fmt::format("rank {} sent an NCCL unique id of {} bytes for process set {}; "
                                "it must have 1 to {} bytes",
                                rank, msg.id().size(), set_id, kMaxCommIdBytes));
  }
  if (!status.ok()) return Refuse(rank, status, set_id, "", out);
  const Payload frame = frames::CommId(msg);
  for (int32_t member : it->second.members())
    if (member != rank && alive(member)) out->push_back({peer_of_rank_[member], frame});
}

}  // namespace tutti::server
