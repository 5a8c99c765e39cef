// Device-path choice: whether a collective on GPU tensors runs on NCCL or staged through host
// memory (host tensors take the CPU transports), and which device group, hence which NCCL
// communicator, it uses (docs/wire-protocol.md, "Device paths"). Apart because it reasons about
// hosts and GPUs, which nothing else in the negotiator knows of. Single-threaded, like Negotiator.
#include "server/core/negotiator.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tutti::server {
namespace {

constexpr int32_t kCuda = 1;  // TUTTI_DEVICE_CUDA

// "GPU-8f3ac1d2-..." as nvidia-smi -L prints a 16-byte uuid; plain hex for any other length.
std::string FormatUuid(const std::string& uuid) {
  std::string hex;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (uuid.size() == 16 && (i == 4 || i == 6 || i == 8 || i == 10)) hex += '-';
    hex += fmt::format("{:02x}", static_cast<unsigned char>(uuid[i]));
  }
  return "GPU-" + hex;
}

void AppendInt(std::string* key, uint32_t value) {
  key->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

void Negotiator::ChooseDevicePath(const std::string& name, const Pending& pending,
                                  wire::Response* response) {
  // Host memory everywhere (or a barrier, which moves no tensor): the CPU transports, group 0.
  if (response->spec().kind() == wire::COLLECTIVE_BARRIER) return;
  const bool any_device =
      std::any_of(pending.variants.begin(), pending.variants.end(),
                  [](const SpecRef& s) { return s->spec.device_type() == kCuda; });
  if (!any_device) return;
  // Device tensors: per member (null: joined), as the rest of the choice reads them.
  std::vector<const wire::TensorSpec*> specs(members_.size(), nullptr);
  for (size_t i = 0; i < members_.size(); ++i)
    if (const AnnouncedSpec* spec = SpecOf(pending, i)) specs[i] = &spec->spec;

  // One tensor name on the CPU on some members and on a GPU on others is a mistake in the script,
  // as Horovod has it (its message says "Mismatched ... CPU/GPU device selection"); staging stays
  // for members that share a GPU and for joined members, whose share is built in host memory.
  const auto host_member = std::find_if(specs.begin(), specs.end(), [](const auto& s) {
    return s && s->device_type() != kCuda;
  });
  const auto device_member = std::find_if(specs.begin(), specs.end(), [](const auto& s) {
    return s && s->device_type() == kCuda;
  });
  if (host_member != specs.end() && device_member != specs.end()) {
    const auto first = std::min(host_member, device_member), second = std::max(host_member, device_member);
    auto where = [](const wire::TensorSpec* s) {
      return s->device_type() == kCuda ? fmt::format("cuda:{}", s->device_index()) : std::string("the CPU");
    };
    SetError(response, Code::kMismatch,
             fmt::format("mismatched CPU/GPU device selection for '{}' on process set {}: rank {} "
                         "has it on {}, rank {} on {}; every member's tensor must be on the CPU, "
                         "or every member's on a GPU",
                         name, set_id_, members_[first - specs.begin()], where(*first),
                         members_[second - specs.begin()], where(*second)));
    return;
  }

  // The members' device combination: per member, 'J' (joined), 'H' (host memory), or 'G', its
  // host, GPU index and uuid. Equal combinations share a group (and an NCCL communicator).
  std::string key;
  key.reserve(specs.size() * 26);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i]) {
      key += 'J';
    } else if (specs[i]->device_type() != kCuda) {
      key += 'H';
    } else {
      key += 'G';
      AppendInt(&key, host_of_[i]);
      AppendInt(&key, static_cast<uint32_t>(specs[i]->device_index()));
      key += static_cast<char>(specs[i]->device_uuid().size());
      key += specs[i]->device_uuid();
    }
  }
  auto known = device_groups_.find(key);
  if (known == device_groups_.end()) {
    if (device_groups_.size() >= kMaxDeviceGroups) {
      SetError(response, Code::kLimitExceeded,
               fmt::format("limit exceeded: process set {} may use at most {} device combinations "
                           "(which GPU, or host memory, each member's tensor is on); '{}' would be "
                           "its {}th",
                           set_id_, kMaxDeviceGroups, name, kMaxDeviceGroups + 1));
      return;
    }
    // Why the collective cannot run on NCCL, if it cannot.
    std::string staged;
    auto OnHost = [this](size_t member) {
      return host_names_[member].empty() ? std::string("on one host")
                                         : "on host " + host_names_[member];
    };
    const auto joined = std::find_if(specs.begin(), specs.end(), [](const auto& s) { return !s; });
    if (joined != specs.end()) {
      staged = fmt::format("rank {} has joined, and its share is built in host memory",
                           members_[joined - specs.begin()]);
    } else {
      // Two members share a GPU when they are on one host and their uuids are equal, or, where a
      // uuid is missing, their device indices.
      std::unordered_map<std::string, size_t> by_uuid;  // host + uuid -> first member
      struct ByIndex {
        size_t first;
        std::optional<size_t> first_without_uuid;
      };
      std::map<std::pair<uint32_t, int32_t>, ByIndex> by_index;  // (host, index)
      for (size_t i = 0; i < specs.size() && staged.empty(); ++i) {
        const wire::TensorSpec& spec = *specs[i];
        const bool has_uuid = !spec.device_uuid().empty();
        std::optional<size_t> other;
        if (has_uuid) {
          std::string id;
          AppendInt(&id, host_of_[i]);
          id += spec.device_uuid();
          auto [at, fresh] = by_uuid.try_emplace(std::move(id), i);
          if (!fresh) {
            staged = fmt::format("ranks {} and {} share GPU {} {}", members_[at->second],
                                 members_[i], FormatUuid(spec.device_uuid()), OnHost(i));
            break;
          }
        }
        auto [at, fresh] = by_index.try_emplace({host_of_[i], spec.device_index()}, ByIndex{i, {}});
        if (!fresh) other = has_uuid ? at->second.first_without_uuid : at->second.first;
        if (!has_uuid && !at->second.first_without_uuid) at->second.first_without_uuid = i;
        if (other)
          staged = fmt::format("ranks {} and {} share GPU cuda:{} {}", members_[*other],
                               members_[i], spec.device_index(), OnHost(i));
      }
    }
    const DeviceGroup group{static_cast<int32_t>(device_groups_.size()),
                            staged.empty() ? wire::DEVICE_PATH_NCCL : wire::DEVICE_PATH_STAGED};
    known = device_groups_.emplace(std::move(key), group).first;
    if (!staged.empty())
      spdlog::warn("{}process set {}: '{}' runs staged through host memory: {} (device group {})",
                   job_.empty() ? "" : fmt::format("job '{}': ", job_), set_id_, name, staged,
                   group.index);
  }
  response->set_device_path(known->second.path);
  response->set_device_group(known->second.index);
}

}  // namespace tutti::server
