// Point-to-point scenarios of tests/multiproc/collectives_test.cc: pipeline stages sending
// tensors beside their own allreduces, and send/recv argument errors with a sender that dies.
#include <tutti/tutti.h>

#include <string>

#include "worker/collective_checks.h"
#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// Two pipeline stages, F={0,1} and B={2,3}, each allreducing on its own set, while rank 1 sends
// activations to rank 2 and rank 2 sends gradients back (world set, tags cycling), with one pair
// of messages received in the opposite order of sending. Prints "pipeline ok".
int Pipeline() {
  int32_t f_ranks[] = {0, 1}, b_ranks[] = {2, 3}, f, b;
  Check("add F", tutti_process_set_add(rt, f_ranks, 2, 0, &f));
  Check("add B", tutti_process_set_add(rt, b_ranks, 2, 0, &b));
  const int32_t stage = my_rank < 2 ? f : b;
  // A world allreduce that ranks 0 and 3 submit only at the end: the world set's point-to-point
  // traffic below must not wait behind it.
  Tensor held(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t held_request = nullptr;
  if (my_rank == 1 || my_rank == 2)
    Check("held", tutti_allreduce(rt, "held", TUTTI_WORLD, &held.desc, &held.desc, nullptr, &held_request));
  for (int i = 0; i < 20; ++i) {
    Tensor grad(TUTTI_DTYPE_FLOAT32, 1000, 4), act(TUTTI_DTYPE_FLOAT32, 64, 4), back(TUTTI_DTYPE_FLOAT32, 8, 4);
    for (int k = 0; k < 1000; ++k) grad.as<float>()[k] = static_cast<float>(my_rank);
    tutti_request_t reduce, p2p = nullptr, p2p_back = nullptr;
    Check("allreduce", tutti_allreduce(rt, ("grad." + std::to_string(i)).c_str(), stage, &grad.desc,
                                       &grad.desc, nullptr, &reduce));
    if (my_rank == 1) {
      for (int k = 0; k < 64; ++k) act.as<float>()[k] = static_cast<float>(i * 100 + k);
      Check("send", tutti_send(rt, TUTTI_WORLD, &act.desc, 2, i % 3, &p2p));
      Check("recv", tutti_recv(rt, TUTTI_WORLD, &back.desc, 2, 100, &p2p_back));
    } else if (my_rank == 2) {
      Check("recv", tutti_recv(rt, TUTTI_WORLD, &act.desc, 1, i % 3, &p2p));
      for (int k = 0; k < 8; ++k) back.as<float>()[k] = static_cast<float>(-i);
      Check("send", tutti_send(rt, TUTTI_WORLD, &back.desc, 1, 100, &p2p_back));
    }
    if (Finish(reduce, "allreduce") != TUTTI_OK) return 1;
    tutti_request_free(reduce);
    const float expected_sum = my_rank < 2 ? 1.0f : 5.0f;
    if (grad.as<float>()[999] != expected_sum) return Say("fail: stage sum %f", grad.as<float>()[999]), 1;
    for (tutti_request_t r : {p2p, p2p_back}) {
      if (!r) continue;
      if (Finish(r, "p2p") != TUTTI_OK) return 1;
      tutti_request_free(r);
    }
    if (my_rank == 2 && act.as<float>()[63] != static_cast<float>(i * 100 + 63)) return Say("fail: activation"), 1;
    if (my_rank == 1 && back.as<float>()[7] != static_cast<float>(-i)) return Say("fail: gradient"), 1;
  }
  if (my_rank == 1 || my_rank == 2) {
    // Tags 5 then 6 sent; received as 6 then 5.
    Tensor five(TUTTI_DTYPE_INT32, 3, 4), six(TUTTI_DTYPE_INT32, 3, 4);
    tutti_request_t r5, r6;
    if (my_rank == 1) {
      five.as<int32_t>()[0] = 5;
      six.as<int32_t>()[0] = 6;
      Check("send 5", tutti_send(rt, TUTTI_WORLD, &five.desc, 2, 5, &r5));
      Check("send 6", tutti_send(rt, TUTTI_WORLD, &six.desc, 2, 6, &r6));
    } else {
      Check("recv 6", tutti_recv(rt, TUTTI_WORLD, &six.desc, 1, 6, &r6));
      Check("recv 5", tutti_recv(rt, TUTTI_WORLD, &five.desc, 1, 5, &r5));
    }
    if (Finish(r5, "tag 5") != TUTTI_OK || Finish(r6, "tag 6") != TUTTI_OK) return 1;
    tutti_request_free(r5);
    tutti_request_free(r6);
    if (five.as<int32_t>()[0] != 5 || six.as<int32_t>()[0] != 6) return Say("fail: tags crossed"), 1;
  }
  if (held_request) {
    const tutti_status_t held_status = tutti_request_test(held_request);
    if (held_status != TUTTI_IN_PROGRESS)
      return Say("fail: 'held' completed before ranks 0 and 3 submitted it: status %d %s",
                 held_status, tutti_last_error()), 1;
  }
  if (my_rank == 0 || my_rank == 3)
    Check("held", tutti_allreduce(rt, "held", TUTTI_WORLD, &held.desc, &held.desc, nullptr, &held_request));
  if (Finish(held_request, "held") != TUTTI_OK) return 1;
  tutti_request_free(held_request);
  Say("pipeline ok");
  return 0;
}

// Point-to-point argument errors and a size mismatch, then a recv from a rank the harness kills:
// prints "err <label> <status> <message>", "posted", then "recv <status> <message>". World of 3;
// rank 1 is the one killed, rank 2 only takes part in the world.
int PointToPointErrors() {
  Tensor t(TUTTI_DTYPE_FLOAT32, 2, 4), big(TUTTI_DTYPE_FLOAT32, 4, 4);
  tutti_request_t request = nullptr;
  int32_t pair[] = {0, 1}, p = -1;
  // Rank 2 is no member, and may be descheduled until rank 0 finalized, when adding a set with
  // rank 0 in it fails: it stays out of the set change.
  if (my_rank < 2) Check("add", tutti_process_set_add(rt, pair, 2, 0, &p));
  if (my_rank == 0) {
    ReportFailure("non-member", tutti_send(rt, p, &t.desc, 2, 0, &request), &request);
    ReportFailure("self", tutti_recv(rt, TUTTI_WORLD, &t.desc, 0, 0, &request), &request);
    ReportFailure("tag", tutti_send(rt, TUTTI_WORLD, &t.desc, 1, -3, &request), &request);
    ReportFailure("size", tutti_recv(rt, TUTTI_WORLD, &t.desc, 1, 7, &request), &request);
    Check("recv", tutti_recv(rt, TUTTI_WORLD, &t.desc, 1, 8, &request));
    Say("posted");
    tutti_status_t status = tutti_request_wait(request, 60000);
    Say("recv %d %s", status, tutti_last_error());
    tutti_request_free(request);
  } else if (my_rank == 1) {
    Check("send", tutti_send(rt, TUTTI_WORLD, &big.desc, 0, 7, &request));
    if (Finish(request, "send") != TUTTI_OK) return 1;
    tutti_request_free(request);
    AwaitGo();  // killed meanwhile
  }
  return 0;
}

const ScenarioRegistrar registered = {
    {"pipeline", Pipeline},
    {"p2p_errors", PointToPointErrors},
};

}  // namespace
}  // namespace worker
