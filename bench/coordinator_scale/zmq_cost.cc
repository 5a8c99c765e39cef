// The zmq-cost scenario (scenarios.h): ZeroMQ's own memory per connection, without tuttid. A
// child process holds a ROUTER set up as tuttid's (coordinator.cc: mandatory routing, handover,
// heartbeats, limits); --ranks DEALERs connect to it as the simulated ranks do. Its RSS before,
// once they are connected, and once each sent one frame, divided by the connections.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "coordinator_scale/scenarios.h"
#include "coordinator_scale/sim_ranks.h"

namespace tutti::bench {
namespace {

// The child: a ROUTER that reads and drops whatever comes, until killed.
[[noreturn]] void ServeRouter(int ready_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.set(zmq::sockopt::router_handover, 1);
  router.set(zmq::sockopt::heartbeat_ivl, 1000);
  router.set(zmq::sockopt::heartbeat_timeout, 600000);
  router.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  router.set(zmq::sockopt::sndhwm, 100000);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  endpoint.push_back('\n');
  if (write(ready_fd, endpoint.data(), endpoint.size()) < 0) _exit(1);
  zmq::message_t message;
  while (true) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    while (router.recv(message, zmq::recv_flags::dontwait)) {
    }
  }
}

}  // namespace

void RunZmqCost(const ScenarioOptions& o, Report* report) {
  int ready[2];
  if (pipe(ready) != 0) return report->Failure("zmq-cost: pipe");
  const pid_t child = fork();
  if (child < 0) return report->Failure("zmq-cost: fork");
  if (child == 0) {
    close(ready[0]);
    ServeRouter(ready[1]);
  }
  close(ready[1]);
  char buffer[256] = {};
  const ssize_t got = read(ready[0], buffer, sizeof(buffer) - 1);
  close(ready[0]);
  if (got <= 0) return report->Failure("zmq-cost: the ROUTER process did not start");
  const std::string endpoint(buffer, strcspn(buffer, "\n"));

  const ProcessSample idle = AwaitSettled(child, 0, std::chrono::seconds(2));
  Fleet fleet(o.ranks, 1);
  for (int32_t r = 0; r < o.ranks; ++r) fleet.Add(0, r, endpoint);
  const ProcessSample connected = AwaitSettled(child, idle.open_fds + o.ranks, std::chrono::seconds(60));
  wire::Frame heartbeat;
  heartbeat.mutable_heartbeat();
  const std::string frame = wire::Encode(heartbeat);
  for (SimRank* rank : fleet.ranks()) Crew::Send(*rank, frame);
  const ProcessSample spoke = AwaitSettled(child, 0, std::chrono::seconds(5));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  report->Value("zmq_router_rss_idle", static_cast<double>(idle.rss_bytes), "bytes");
  report->Value("zmq_router_rss_per_connection", double(connected.rss_bytes - idle.rss_bytes) / o.ranks,
                "bytes");
  report->Value("zmq_router_rss_per_connection_after_a_frame",
                double(spoke.rss_bytes - idle.rss_bytes) / o.ranks, "bytes");
  if (connected.open_fds < idle.open_fds + o.ranks)
    report->Failure("zmq-cost: not every connection was accepted");
}

}  // namespace tutti::bench
