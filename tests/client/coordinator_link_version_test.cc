// A rank's link against a tuttid of another protocol (docs/wire-protocol.md, "Versions"): a fake
// tuttid, a bare ROUTER on loopback, answers the registration with one frame stamped as another
// protocol would. The registration must end with the exact status tutti_init would return, not
// wait for its timeout; a newer tuttid that serves this rank is accepted.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include <zmq.hpp>

#include "client/client_test_support.h"
#include "client/control/coordinator_link.h"
#include "proto/status_codec.h"
#include "proto/versions.h"

namespace tutti::client {
namespace {

using namespace tutti::testing;

class QuietListener : public LinkListener {
 public:
  void OnExecute(wire::Execute&) override {}
  void OnTensorRefused(int32_t, const std::string&, const Status&) override {}
  void OnRanksLost(const std::vector<int32_t>&, const Status&) override {}
  void OnSetsBroken(const std::vector<int32_t>&, const Status&, bool) override {}
  void OnReformed(const wire::Reformed&) override {}
  void OnRanksWaiting(int32_t) override {}
  void OnCommId(int32_t, int32_t, const std::string&) override {}
  void OnLinkDead(const Status&) override {}
  void OnFailover(bool, const std::string&) override {}
  void OnWarning(const std::string&) override {}
};

// Registers one rank with a fake tuttid that answers `answer`, stamped `version`.
Status RegisterAgainst(wire::Frame answer, uint32_t version) {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  answer.set_magic(wire::kMagic);
  answer.set_version(version);
  std::thread tuttid([&] {
    zmq::message_t id, body;
    if (!router.recv(id) || !router.recv(body)) return;
    router.send(id, zmq::send_flags::sndmore);
    router.send(zmq::buffer(answer.SerializeAsString()), zmq::send_flags::none);
  });
  QuietListener listener;
  Counters counters;
  Status status;
  {
    CoordinatorLink link(endpoint, &listener, &counters, std::chrono::microseconds(0),
                         CurveClientKeys{});
    wire::Register request;
    request.set_job("versions");
    request.set_rank(0);
    request.set_size(1);
    request.set_rendezvous_timeout_ms(20000);  // a link that waits this long has failed the test
    wire::Welcome welcome;
    status = link.Register(request, &welcome);
  }
  tuttid.join();
  return status;
}

TEST(CoordinatorLinkVersions, ANewerTuttidThatRefusesThisProtocolEndsTheRegistration) {
  wire::Frame refusal;
  wire::ToWire(Status(Code::kVersionMismatch, "version mismatch: client 6, coordinator 8 "
                                              "(tuttid serves ranks of protocols 7 to 8)"),
               refusal.mutable_refusal()->mutable_error());
  EXPECT_TRUE(IsStatus(RegisterAgainst(refusal, 8), Code::kVersionMismatch,
                       "version mismatch: tuttid speaks protocol 8 and does not serve this "
                       "rank's protocol 7 (tuttid: version mismatch: client 6, coordinator 8 "
                       "(tuttid serves ranks of protocols 7 to 8)): run the job with a newer "
                       "tutti (docs/wire-protocol.md, \"Versions\")"));
}

TEST(CoordinatorLinkVersions, AnOlderTuttidIsRefusedEvenWhenItWelcomes) {
  wire::Frame welcome;
  welcome.mutable_welcome()->set_coordinator_epoch(1);
  EXPECT_TRUE(IsStatus(RegisterAgainst(welcome, wire::kProtocolVersion - 1),
                       Code::kVersionMismatch,
                       "version mismatch: tuttid speaks protocol 6, older than this rank's 7: "
                       "upgrade tuttid before the jobs that use it (docs/wire-protocol.md, "
                       "\"Versions\")"));
}

TEST(CoordinatorLinkVersions, ANewerTuttidThatServesThisProtocolWelcomes) {
  wire::Frame welcome;
  welcome.mutable_welcome()->set_coordinator_epoch(1);
  EXPECT_TRUE(IsOk(RegisterAgainst(welcome, wire::kProtocolVersion + 1)));
}

}  // namespace
}  // namespace tutti::client
