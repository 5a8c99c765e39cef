// Request::WaitUntil's bounded spin (client/exec/request.h; docs/steady-state.md, "Waiting"): a
// request completed by another thread while its waiter polls is seen with its status and result;
// one completed after the spin still wakes its waiter, which then sleeps on the condition
// variable; the spin never outlasts the deadline; an error status comes through the spin as it
// does through the sleep. Runs under ASan and TSan (scripts/tsan.sh): the completing thread's
// writes must be visible to the spinning waiter without a race.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "client/client_test_support.h"
#include "client/exec/request.h"

namespace tutti::client {
namespace {

using namespace std::chrono_literals;
using namespace tutti::testing;

std::shared_ptr<Request> NewRequest() {
  Request::Operation op;
  op.spec.set_name("waited");
  return std::make_shared<Request>(std::move(op));
}

TEST(RequestWait, ACompletionDuringTheSpinIsSeenWithItsStatusAndResult) {
  for (int i = 0; i < 200; ++i) {  // many rounds: the completion lands at different points
    auto request = NewRequest();
    std::thread completer([&] {
      request->result().received_splits = {int64_t{i}};  // written before Complete
      request->Complete(Status::Ok());
    });
    auto status = request->WaitUntil(std::chrono::steady_clock::now() + 10s, 1s);
    completer.join();
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(IsOk(*status));
    ASSERT_EQ(request->result().received_splits.size(), 1u);
    EXPECT_EQ(request->result().received_splits[0], i);
  }
}

TEST(RequestWait, ACompletionAfterTheSpinWakesTheSleepingWaiter) {
  auto request = NewRequest();
  std::thread completer([&] {
    std::this_thread::sleep_for(50ms);  // well past the 1 us spin: the waiter sleeps by then
    request->Complete(Status(Code::kPeerLost, "peer lost: rank 1"));
  });
  auto status = request->WaitUntil(std::chrono::steady_clock::now() + 10s, 1us);
  completer.join();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(IsStatus(*status, Code::kPeerLost, "peer lost: rank 1"));
}

TEST(RequestWait, TheSpinEndsAtTheDeadline) {
  auto request = NewRequest();
  const auto start = std::chrono::steady_clock::now();
  auto status = request->WaitUntil(start + 20ms, 10s);  // a spin far longer than the deadline
  EXPECT_FALSE(status.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // bounded by the deadline, not the spin
  request->Complete(Status::Ok());
  status = request->WaitUntil(std::chrono::steady_clock::now() + 10s, 10s);
  ASSERT_TRUE(status.has_value());  // already done: returns at once
  EXPECT_TRUE(IsOk(*status));
}

TEST(RequestWait, AnErrorDuringTheSpinComesThroughUnchanged) {
  auto request = NewRequest();
  std::thread completer([&] { request->Complete(Status(Code::kAborted, "aborted by rank 0")); });
  auto status = request->WaitUntil(std::chrono::steady_clock::now() + 10s, 1s);
  completer.join();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(IsStatus(*status, Code::kAborted, "aborted by rank 0"));
}

}  // namespace
}  // namespace tutti::client
