// Process sets through the C ABI: adding and removing them (each collective over the set's
// members, with a timeout) and asking who is in one. Membership is asked of the runtime on every
// call, never cached here. Ranks are global ranks; a rank's position in a set is its index among
// the set's sorted ranks.
#include <algorithm>
#include <string>
#include <vector>

#include "capi/fence.h"
#include "capi/handles.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

using namespace tutti;
using namespace tutti::capi;

extern "C" {

TUTTI_API tutti_status_t tutti_process_set_add(tutti_runtime_t rt, const int32_t* ranks,
                                               int32_t nranks, int64_t timeout_ms,
                                               int32_t* set_id) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(set_id);
    if (nranks < 1) return Invalid("nranks is " + std::to_string(nranks) + "; a set needs a rank");
    if (ranks == nullptr) return Invalid("ranks is NULL");
    return Report(rt->runtime->AddProcessSet({ranks, ranks + nranks}, timeout_ms, set_id));
  });
}

TUTTI_API tutti_status_t tutti_process_set_remove(tutti_runtime_t rt, int32_t set_id,
                                                  int64_t timeout_ms) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    return Report(rt->runtime->RemoveProcessSet(set_id, timeout_ms));
  });
}

TUTTI_API tutti_status_t tutti_process_set_autotune(tutti_runtime_t rt, int32_t set_id) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    return Report(rt->runtime->AutotuneProcessSet(set_id));
  });
}

TUTTI_API tutti_status_t tutti_process_set_ranks(tutti_runtime_t rt, int32_t set_id, int32_t* ranks,
                                                 int32_t capacity, int32_t* count) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(count);
    if (capacity < 0) return Invalid("capacity is negative");
    if (capacity > 0 && ranks == nullptr) return Invalid("ranks is NULL");
    std::vector<int32_t> members;
    Status status = rt->runtime->ProcessSetRanks(set_id, &members);
    if (!status.ok()) return Report(status);
    *count = static_cast<int32_t>(members.size());
    std::copy_n(members.begin(), std::min<size_t>(members.size(), capacity), ranks);
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_process_set_size(tutti_runtime_t rt, int32_t set_id, int32_t* size) {
  return tutti_process_set_ranks(rt, set_id, nullptr, 0, size);
}

// Position of this rank in the set, or -1: shared by included() and rank().
static tutti_status_t PositionInSet(tutti_runtime_t rt, int32_t set_id, int32_t* position) {
  TUTTI_CHECK_RUNTIME(rt);
  std::vector<int32_t> members;
  Status status = rt->runtime->ProcessSetRanks(set_id, &members);
  if (!status.ok()) return Report(status);
  auto it = std::lower_bound(members.begin(), members.end(), rt->runtime->rank());
  *position = (it != members.end() && *it == rt->runtime->rank())
                  ? static_cast<int32_t>(it - members.begin())
                  : -1;
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_process_set_included(tutti_runtime_t rt, int32_t set_id,
                                                    int32_t* included) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(included);
    int32_t position = -1;
    tutti_status_t status = PositionInSet(rt, set_id, &position);
    if (status == TUTTI_OK) *included = position >= 0;
    return status;
  });
}

TUTTI_API tutti_status_t tutti_process_set_rank(tutti_runtime_t rt, int32_t set_id,
                                                int32_t* rank_in_set) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(rank_in_set);
    int32_t position = -1;
    tutti_status_t status = PositionInSet(rt, set_id, &position);
    if (status != TUTTI_OK) return status;
    if (position < 0)
      return Fail(TUTTI_ERR_NOT_A_MEMBER, "rank " + std::to_string(rt->runtime->rank()) +
                                              " is not a member of process set " +
                                              std::to_string(set_id));
    *rank_in_set = position;
    return TUTTI_OK;
  });
}

}  // extern "C"
