#include "client/runtime_options.h"

#include <cerrno>
#include <cstdlib>

#include "client/host_identity.h"

namespace tutti::client {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// The first of `names` that is set, parsed as an integer; an error names a malformed variable.
Status IntFromEnv(std::initializer_list<const char*> names, std::optional<int64_t>* out) {
  for (const char* name : names) {
    auto value = Env(name);
    if (!value) continue;
    errno = 0;
    char* end = nullptr;
    long long parsed = std::strtoll(value->c_str(), &end, 10);
    if (errno != 0 || *end != '\0')
      return Status(Code::kInvalidArgument,
                    std::string(name) + "='" + *value + "' is not an integer");
    *out = parsed;
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

Status ResolveOptions(const RequestedOptions& requested, RuntimeOptions* resolved) {
  RuntimeOptions o;
  auto coordinator = requested.coordinator ? requested.coordinator : Env("TUTTI_COORDINATOR");
  if (!coordinator)
    return Status(Code::kInvalidArgument,
                  "no coordinator: set TUTTI_COORDINATOR (e.g. tcp://127.0.0.1:5555) or "
                  "options.coordinator");
  o.coordinator = *coordinator;
  o.job = requested.job ? *requested.job : Env("TUTTI_JOB").value_or("default");
  o.token = requested.token ? *requested.token : Env("TUTTI_TOKEN").value_or("");

  std::optional<int64_t> rank, size, timeout;
  if (requested.rank) rank = *requested.rank;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"}, &rank));
  if (requested.size) size = *requested.size;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE"}, &size));
  if (!rank || !size)
    return Status(Code::kInvalidArgument,
                  "rank and size unknown: set TUTTI_RANK and TUTTI_SIZE (tuttirun does) or pass "
                  "them in the options");
  if (*size < 1 || *size > (1 << 20))
    return Status(Code::kInvalidArgument, "world size " + std::to_string(*size) + " outside [1, 1048576]");
  if (*rank < 0 || *rank >= *size)
    return Status(Code::kInvalidArgument, "rank " + std::to_string(*rank) + " outside [0, " +
                                              std::to_string(*size) + ")");
  o.rank = static_cast<int32_t>(*rank);
  o.size = static_cast<int32_t>(*size);

  if (requested.timeout_ms > 0) timeout = requested.timeout_ms;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_TIMEOUT_MS"}, &timeout));
  o.timeout_ms = timeout.value_or(kDefaultTimeoutMs);
  if (o.timeout_ms <= 0) return Status(Code::kInvalidArgument, "TUTTI_TIMEOUT_MS must be positive");

  o.host_id = Env("TUTTI_HOST_ID").value_or(HostIdentity());
  o.data_address = Env("TUTTI_DATA_ADDR").value_or(LocalAddressToward(o.coordinator));
  o.static_sets = requested.static_sets;
  o.allocator = requested.allocator;
  *resolved = std::move(o);
  return Status::Ok();
}

}  // namespace tutti::client
