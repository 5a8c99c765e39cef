// Status strings, the thread-local detail text of the last error with the helpers that record it,
// and the two entry points that read them. The text is thread_local: each thread sees the error
// of its own last call.
#include <string>
#include <utility>

#include "capi/status_text.h"

namespace tutti::capi {
namespace {
thread_local std::string last_error;

// Report() hands a Status's code to the caller as is, so the two numberings must agree.
#define TUTTI_SAME_CODE(c, k) static_assert(c == static_cast<int>(Code::k), #c " drifted from Code::" #k)
TUTTI_SAME_CODE(TUTTI_ERR_INVALID_ARGUMENT, kInvalidArgument);
TUTTI_SAME_CODE(TUTTI_ERR_UNKNOWN_SET, kUnknownSet);
TUTTI_SAME_CODE(TUTTI_ERR_NOT_A_MEMBER, kNotAMember);
TUTTI_SAME_CODE(TUTTI_ERR_DUPLICATE_NAME, kDuplicateName);
TUTTI_SAME_CODE(TUTTI_ERR_MISMATCH, kMismatch);
TUTTI_SAME_CODE(TUTTI_ERR_PEER_LOST, kPeerLost);
TUTTI_SAME_CODE(TUTTI_ERR_COORDINATOR_LOST, kCoordinatorLost);
TUTTI_SAME_CODE(TUTTI_ERR_TIMEOUT, kTimeout);
TUTTI_SAME_CODE(TUTTI_ERR_ABORTED, kAborted);
TUTTI_SAME_CODE(TUTTI_ERR_STALLED, kStalled);
TUTTI_SAME_CODE(TUTTI_ERR_VERSION_MISMATCH, kVersionMismatch);
TUTTI_SAME_CODE(TUTTI_ERR_AUTH_FAILED, kAuthFailed);
TUTTI_SAME_CODE(TUTTI_ERR_SHUT_DOWN, kShutDown);
TUTTI_SAME_CODE(TUTTI_ERR_INTERNAL, kInternal);
TUTTI_SAME_CODE(TUTTI_ERR_SET_REMOVED, kSetRemoved);
TUTTI_SAME_CODE(TUTTI_ERR_UNSUPPORTED, kUnsupported);
TUTTI_SAME_CODE(TUTTI_ERR_EVICTED, kEvicted);
TUTTI_SAME_CODE(TUTTI_ERR_LIMIT_EXCEEDED, kLimitExceeded);
TUTTI_SAME_CODE(TUTTI_ERR_DEVICE_UNAVAILABLE, kDeviceUnavailable);
TUTTI_SAME_CODE(TUTTI_ERR_REFORMED, kReformed);
#undef TUTTI_SAME_CODE
}  // namespace

const char* StatusString(tutti_status_t status) {
  switch (status) {
    case TUTTI_OK: return "ok";
    case TUTTI_IN_PROGRESS: return "in progress: the request has not completed yet; test or wait again";
    case TUTTI_ERR_INVALID_ARGUMENT: return "invalid argument: fix the call; tutti_last_error() names the argument";
    case TUTTI_ERR_UNKNOWN_SET: return "unknown process set: add the set on this rank first, or stop using a removed set";
    case TUTTI_ERR_NOT_A_MEMBER: return "not a member: only the set's ranks may run collectives on it";
    case TUTTI_ERR_DUPLICATE_NAME: return "duplicate name: a request of that name is already pending on the set; wait for it or pick another name";
    case TUTTI_ERR_MISMATCH: return "mismatch across ranks: the ranks submitted different tensors under one name; the message names both variants";
    case TUTTI_ERR_PEER_LOST: return "peer lost: a rank of the set died or disconnected; restart or re-form the job";
    case TUTTI_ERR_COORDINATOR_LOST: return "coordinator lost: tuttid did not answer; check that it runs and is reachable";
    case TUTTI_ERR_TIMEOUT: return "timeout: the operation did not complete in time; the message names the ranks that were missing";
    case TUTTI_ERR_ABORTED: return "aborted: the operation was cancelled";
    case TUTTI_ERR_STALLED: return "stalled: some ranks never submitted the operation";
    case TUTTI_ERR_VERSION_MISMATCH: return "version mismatch: use the same tutti version for the library, the header and tuttid";
    case TUTTI_ERR_AUTH_FAILED: return "authentication failed: every rank of a job must present the job's token";
    case TUTTI_ERR_SHUT_DOWN: return "shut down: the runtime was finalized";
    case TUTTI_ERR_INTERNAL: return "internal error: a bug in tutti; please report it with tutti_last_error()";
    case TUTTI_ERR_SET_REMOVED: return "set removed: the process set was removed while the request was pending";
    case TUTTI_ERR_UNSUPPORTED: return "unsupported: this build or this machine cannot do that";
    case TUTTI_ERR_LIMIT_EXCEEDED: return "limit exceeded: tuttid refused the request to protect itself and other jobs (too many pending tensors, jobs or registrations); see the message for the limit and its setting";
    case TUTTI_ERR_DEVICE_UNAVAILABLE: return "device unavailable: this process cannot use the tensor's device (library built without GPU support, GPU module or CUDA/NCCL libraries not loadable, or no such device); tutti_last_error() says which, tutti_device_check() tests in advance";
    case TUTTI_ERR_EVICTED: return "evicted: the coordinator declared this rank lost after it stopped responding; it cannot rejoin the job, restart it";
    case TUTTI_ERR_REFORMED: return "re-formed: an elastic job lost a rank and moved to its next membership epoch; requests of the earlier epoch on sets that lost a member failed; restore, re-sync and go on (tutti_membership_epoch, tutti_rank and tutti_size give the new world)";
    default: return "unknown status: not a tutti status code";
  }
}

tutti_status_t Fail(tutti_status_t status, std::string message) {
  last_error = std::move(message);
  return status;
}

void ClearError() { last_error.clear(); }

const char* LastError() { return last_error.c_str(); }

tutti_status_t Report(const Status& status) {
  if (status.ok()) return TUTTI_OK;
  return Fail(static_cast<tutti_status_t>(status.code()), status.message());
}

tutti_status_t Invalid(std::string message) {
  return Fail(TUTTI_ERR_INVALID_ARGUMENT, std::move(message));
}

}  // namespace tutti::capi

extern "C" {

TUTTI_API const char* tutti_status_string(tutti_status_t status) {
  return tutti::capi::StatusString(status);
}

TUTTI_API const char* tutti_last_error(void) { return tutti::capi::LastError(); }

TUTTI_API tutti_status_t tutti_set_last_error(tutti_status_t status, const char* message) {
  if (status == TUTTI_OK) {
    tutti::capi::ClearError();
    return TUTTI_OK;
  }
  return tutti::capi::Fail(status, message != nullptr ? message : "");
}

}  // extern "C"
