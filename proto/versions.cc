#include "proto/versions.h"

#include <string>

#include "proto/status_codec.h"

namespace tutti::wire {

Status CheckRankVersion(uint32_t version) {
  if (version >= kOldestProtocolVersion && version <= kProtocolVersion) return Status::Ok();
  return Status(Code::kVersionMismatch,
                "version mismatch: client " + std::to_string(version) + ", coordinator " +
                    std::to_string(kProtocolVersion) + " (tuttid serves ranks of protocols " +
                    std::to_string(kOldestProtocolVersion) + " to " +
                    std::to_string(kProtocolVersion) + ")");
}

Status CheckHaRankVersion(uint32_t version) {
  if (version >= kFirstHaProtocolVersion) return Status::Ok();
  return Status(Code::kVersionMismatch,
                "version mismatch: client " + std::to_string(version) + ", coordinator " +
                    std::to_string(kProtocolVersion) + " (tuttid runs in an HA group, which "
                    "serves ranks of protocol " + std::to_string(kFirstHaProtocolVersion) +
                    " and later: older ones cannot follow a failover)");
}

Status CheckCoordinatorVersion(const Frame& frame) {
  const uint32_t version = frame.version();
  const std::string theirs = std::to_string(version), ours = std::to_string(kProtocolVersion);
  if (version == kProtocolVersion) return Status::Ok();
  if (version < kProtocolVersion)
    return Status(Code::kVersionMismatch,
                  "version mismatch: tuttid speaks protocol " + theirs + ", older than this "
                  "rank's " + ours + ": upgrade tuttid before the jobs that use it "
                  "(docs/wire-protocol.md, \"Versions\")");
  // A newer tuttid serves this rank (N-1) with frames it can read, stamped with its own version.
  // It does not serve it when it refuses the rank's version, or sends a body this rank's schema
  // does not have (protobuf parses it as no body, keeping the bytes as unknown fields).
  const bool refused = frame.has_refusal() && frame.refusal().error().code() ==
                                                  static_cast<int32_t>(Code::kVersionMismatch);
  if (!refused && frame.body_case() != Frame::BODY_NOT_SET) return Status::Ok();
  const std::string reason =
      refused ? " (tuttid: " + frame.refusal().error().message() + ")"
              : " (it sent a frame this rank cannot read)";
  return Status(Code::kVersionMismatch,
                "version mismatch: tuttid speaks protocol " + theirs + " and does not serve this "
                "rank's protocol " + ours + reason + ": run the job with a newer tutti "
                "(docs/wire-protocol.md, \"Versions\")");
}

}  // namespace tutti::wire
