#include "client/runtime_options.h"

#include <cerrno>
#include <cstdlib>

#include <zmq.h>

#include "client/host_identity.h"
#include "client/launcher_env.h"
#include "common/local_address.h"
#include "transport/route_planner.h"

namespace tutti::client {
namespace {

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

Status DoubleFromEnv(const char* name, std::optional<double>* out) {
  auto value = Env(name);
  if (!value) return Status::Ok();
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(value->c_str(), &end);
  if (errno != 0 || *end != '\0' || parsed != parsed)
    return Status(Code::kInvalidArgument, std::string(name) + "='" + *value + "' is not a number");
  *out = parsed;
  return Status::Ok();
}

// Seconds as asked for (an option or the environment) to what the coordinator is sent.
int64_t StallMs(std::optional<double> seconds) {
  if (!seconds) return 0;          // tuttid's default
  if (*seconds <= 0) return -1;    // off
  return static_cast<int64_t>(*seconds * 1000);
}

// TUTTI_ELASTIC=1 with TUTTI_MIN_SIZE and TUTTI_ELASTIC_TIMEOUT (seconds), as tuttirun
// --min-np/--elastic-timeout set them.
Status ResolveElastic(int32_t size, ElasticOptions* elastic) {
  std::optional<int64_t> on, min_size, max_size;
  std::optional<double> timeout_s;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_ELASTIC"}, &on));
  if (!on || *on == 0) return Status::Ok();
  elastic->on = true;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_MIN_SIZE"}, &min_size));
  TUTTI_RETURN_IF_ERROR(DoubleFromEnv("TUTTI_ELASTIC_TIMEOUT", &timeout_s));
  elastic->min_size = static_cast<int32_t>(min_size.value_or(1));
  if (elastic->min_size < 1 || elastic->min_size > size)
    return Status(Code::kInvalidArgument, "TUTTI_MIN_SIZE=" + std::to_string(elastic->min_size) +
                                              " must be in [1, " + std::to_string(size) +
                                              "], the world size");
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_MAX_SIZE"}, &max_size));
  if (max_size) {
    if (*max_size < size || *max_size > (1 << 20))
      return Status(Code::kInvalidArgument, "TUTTI_MAX_SIZE=" + std::to_string(*max_size) +
                                                " must be in [" + std::to_string(size) +
                                                ", 1048576]: at least the world size");
    elastic->max_size = static_cast<int32_t>(*max_size);
  }
  if (timeout_s) {
    if (*timeout_s <= 0 || *timeout_s > 86400)
      return Status(Code::kInvalidArgument,
                    "TUTTI_ELASTIC_TIMEOUT must be in (0, 86400] seconds");
    elastic->timeout_ms = static_cast<int64_t>(*timeout_s * 1000);
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
  TUTTI_RETURN_IF_ERROR(ResolveElastic(static_cast<int32_t>(*size), &o.elastic));
  // In an elastic job a number at or above the size is a rank added to the running job.
  if (*rank < 0 || (*rank >= *size && !o.elastic.on) || *rank > INT32_MAX)
    return Status(Code::kInvalidArgument, "rank " + std::to_string(*rank) + " outside [0, " +
                                              std::to_string(*size) + ")");
  o.rank = static_cast<int32_t>(*rank);
  o.size = static_cast<int32_t>(*size);

  if (requested.timeout_ms > 0) timeout = requested.timeout_ms;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_TIMEOUT_MS"}, &timeout));
  o.timeout_ms = timeout.value_or(kDefaultTimeoutMs);
  if (o.timeout_ms <= 0) return Status(Code::kInvalidArgument, "TUTTI_TIMEOUT_MS must be positive");

  o.host_id = Env("TUTTI_HOST_ID").value_or(HostIdentity());
  // An HA group's members are listed comma-separated: the route toward the first tells.
  o.data_address = Env("TUTTI_DATA_ADDR")
                       .value_or(LocalAddressToward(o.coordinator.substr(0, o.coordinator.find(','))));
  o.static_sets = requested.static_sets;
  o.allocator = requested.allocator;

  std::optional<int64_t> threshold, capacity;
  if (requested.fusion_threshold) threshold = *requested.fusion_threshold;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_FUSION_THRESHOLD"}, &threshold));
  o.fusion_threshold = threshold.value_or(kDefaultFusionThreshold);
  o.fusion_threshold_pinned = threshold.has_value();
  if (o.fusion_threshold < 0)
    return Status(Code::kInvalidArgument, "the fusion threshold (TUTTI_FUSION_THRESHOLD) must not be negative");
  if (requested.cache_capacity) capacity = *requested.cache_capacity;
  else TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_CACHE_CAPACITY"}, &capacity));
  if (capacity && (*capacity < 0 || *capacity > (1 << 20)))
    return Status(Code::kInvalidArgument, "the cache capacity (TUTTI_CACHE_CAPACITY) " +
                                              std::to_string(*capacity) + " is outside [0, 1048576]");
  o.cache_capacity = static_cast<int32_t>(capacity.value_or(kDefaultCacheCapacity));
  std::optional<int64_t> fast_path;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_FAST_PATH"}, &fast_path));
  o.fast_path = fast_path.value_or(1) != 0;
  std::optional<int64_t> spin;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_WAIT_SPIN_US"}, &spin));
  if (spin && (*spin < 0 || *spin > 1000000))
    return Status(Code::kInvalidArgument, "TUTTI_WAIT_SPIN_US " + std::to_string(*spin) +
                                              " is outside [0, 1000000]");
  o.wait_spin = std::chrono::microseconds(spin.value_or(kDefaultWaitSpinUs));
  std::optional<int64_t> autotune, small, pipeline;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_AUTOTUNE"}, &autotune));
  o.autotune = autotune.value_or(0) != 0;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_SMALL_ALLREDUCE_BYTES"}, &small));
  if (small && *small < 0)
    return Status(Code::kInvalidArgument, "TUTTI_SMALL_ALLREDUCE_BYTES must not be negative");
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_PIPELINE_BYTES"}, &pipeline));
  if (pipeline && *pipeline <= 0)
    return Status(Code::kInvalidArgument, "TUTTI_PIPELINE_BYTES must be positive");
  // 0 bytes "pinned" means: never the direct exchange, which the wire says as 0 too; pin it as 1
  // byte less than anything (no allreduce of 0 bytes moves data).
  o.small_allreduce_bytes = small ? std::max<int64_t>(*small, 1) : 0;
  o.pipeline_bytes = pipeline.value_or(0);
  std::optional<double> cycle = requested.cycle_time_ms;
  if (!cycle) TUTTI_RETURN_IF_ERROR(DoubleFromEnv("TUTTI_CYCLE_TIME_MS", &cycle));
  if (cycle && (*cycle < 0 || *cycle > 60000))
    return Status(Code::kInvalidArgument, "the cycle time (TUTTI_CYCLE_TIME_MS) must be in [0, 60000] ms");
  o.cycle_time = std::chrono::microseconds(static_cast<int64_t>(cycle.value_or(0) * 1000));
  std::optional<double> warning = requested.stall_warning_s, shutdown = requested.stall_shutdown_s;
  if (!warning) TUTTI_RETURN_IF_ERROR(DoubleFromEnv("TUTTI_STALL_WARNING_SECONDS", &warning));
  if (!shutdown) TUTTI_RETURN_IF_ERROR(DoubleFromEnv("TUTTI_STALL_SHUTDOWN_SECONDS", &shutdown));
  o.stall_warning_ms = StallMs(warning);
  o.stall_shutdown_ms = StallMs(shutdown);
  o.timeline = requested.timeline ? *requested.timeline : Env("TUTTI_TIMELINE").value_or("");
  o.autotune_log = Env("TUTTI_AUTOTUNE_LOG").value_or("");
  o.transport = requested.transport ? *requested.transport : Env("TUTTI_TRANSPORT").value_or("auto");
  // A forced backend this process cannot use (ibverbs without an RDMA device) is refused here,
  // on every rank alike, before the coordinator is met.
  TUTTI_RETURN_IF_ERROR(transport::CheckForcedTransport(o.transport));
  const std::string security = Env("TUTTI_DATA_SECURITY").value_or("off");
  if (!transport::ParseDataSecurity(security.empty() ? "off" : security, &o.data_security))
    return Status(Code::kInvalidArgument, "TUTTI_DATA_SECURITY is '" + security +
                                              "': use off, integrity or encrypt");
  const std::string hierarchical = Env("TUTTI_HIERARCHICAL").value_or("auto");
  if (hierarchical == "auto" || hierarchical.empty()) o.hierarchical = HierarchyMode::kAuto;
  else if (hierarchical == "0") o.hierarchical = HierarchyMode::kOff;
  else if (hierarchical == "1") o.hierarchical = HierarchyMode::kOn;
  else
    return Status(Code::kInvalidArgument,
                  "TUTTI_HIERARCHICAL is '" + hierarchical + "': use auto, 0 (flat) or 1");
  std::optional<int64_t> hierarchical_min;
  TUTTI_RETURN_IF_ERROR(IntFromEnv({"TUTTI_HIERARCHICAL_MIN_BYTES"}, &hierarchical_min));
  o.hierarchical_min_bytes = hierarchical_min.value_or(kDefaultHierarchicalMinBytes);
  if (o.hierarchical_min_bytes < 0)
    return Status(Code::kInvalidArgument, "TUTTI_HIERARCHICAL_MIN_BYTES must not be negative");
  // CURVE: all three keys or none, so that a typo never silently turns authentication off.
  const char* curve_names[] = {"TUTTI_CURVE_SERVER_KEY", "TUTTI_CURVE_PUBLIC_KEY",
                               "TUTTI_CURVE_SECRET_KEY"};
  std::string* curve_keys[] = {&o.curve.server_public, &o.curve.public_key, &o.curve.secret_key};
  int curve_set = 0;
  for (int i = 0; i < 3; ++i) {
    *curve_keys[i] = Env(curve_names[i]).value_or("");
    if (curve_keys[i]->empty()) continue;
    ++curve_set;
    uint8_t bytes[32];
    if (curve_keys[i]->size() != 40 || zmq_z85_decode(bytes, curve_keys[i]->c_str()) == nullptr)
      return Status(Code::kInvalidArgument,
                    std::string(curve_names[i]) +
                        " is not a CURVE key (40 characters of Z85, as printed by tuttid "
                        "--generate-curve-keypair)");
  }
  if (curve_set != 0 && curve_set != 3)
    return Status(Code::kInvalidArgument,
                  "CURVE needs TUTTI_CURVE_SERVER_KEY, TUTTI_CURVE_PUBLIC_KEY and "
                  "TUTTI_CURVE_SECRET_KEY together; only " + std::to_string(curve_set) +
                      " of them are set");
  // Last, so that a wrong setting is named even where the launcher gives no job id.
  const auto job = requested.job ? requested.job : JobIdFromLauncher();
  if (!job || job->empty())
    return Status(Code::kInvalidArgument,
                  "no job id: set TUTTI_JOB (tuttirun does) or options.job, or start the ranks "
                  "with mpirun, Slurm or torchrun, whose job ids tutti reads");
  o.job = *job;
  *resolved = std::move(o);
  return Status::Ok();
}

}  // namespace tutti::client
