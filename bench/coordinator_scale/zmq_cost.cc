// The zmq-cost scenario (scenarios.h): ZeroMQ's own memory per connection, without tuttid. A
// child process holds a ROUTER set up as tuttid's (coordinator.cc: mandatory routing, handover,
// limits); --ranks DEALERs connect to it as the simulated ranks do. Its RSS before, once they are
// connected, after a frame each way of a rendezvous' sizes, and after a few hundred small ones,
// divided by the connections.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include <fmt/format.h>

#include "coordinator_scale/scenarios.h"
#include "coordinator_scale/sim_ranks.h"

namespace tutti::bench {
namespace {

// The child: a ROUTER that answers a connection's first frame with `first_reply_bytes` bytes (as
// tuttid answers a Register with a Welcome) and echoes the others, until killed.
[[noreturn]] void ServeRouter(int ready_fd, size_t first_reply_bytes) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.set(zmq::sockopt::router_handover, 1);
  router.set(zmq::sockopt::tcp_keepalive, 1);
  router.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  router.set(zmq::sockopt::sndhwm, 100000);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  endpoint.push_back('\n');
  if (write(ready_fd, endpoint.data(), endpoint.size()) < 0) _exit(1);
  std::set<std::string> answered;
  zmq::message_t id, body;
  while (true) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    while (router.recv(id, zmq::recv_flags::dontwait)) {
      if (!router.recv(body, zmq::recv_flags::dontwait)) continue;
      if (answered.insert(id.to_string()).second) body = zmq::message_t(first_reply_bytes);
      router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router.send(body, zmq::send_flags::dontwait);
    }
  }
}

// Every rank sends `frame` and waits for the answer.
bool RoundTrip(std::vector<Crew>& crews, const std::string& frame) {
  return OnEveryCrew(crews, [&](Crew& crew, size_t) {
    for (SimRank* rank : crew.ranks())
      if (!Crew::Send(*rank, frame)) return false;
    return crew.Await(
        crew.ranks(), [](SimRank&, const zmq::message_t&) { return true; },
        Clock::now() + std::chrono::seconds(60));
  });
}

}  // namespace

ZmqConnectionCost MeasureZmqConnectionCost(int connections, size_t register_bytes,
                                           size_t welcome_bytes, int threads) {
  ZmqConnectionCost cost;
  int ready[2];
  if (pipe(ready) != 0) return cost;
  const pid_t child = fork();
  if (child < 0) return cost;
  if (child == 0) {
    close(ready[0]);
    ServeRouter(ready[1], welcome_bytes);
  }
  close(ready[1]);
  char buffer[256] = {};
  const ssize_t got = read(ready[0], buffer, sizeof(buffer) - 1);
  close(ready[0]);
  if (got > 0) {
    const std::string endpoint(buffer, strcspn(buffer, "\n"));
    const ProcessSample idle = AwaitSettled(child, 0, std::chrono::seconds(2));
    Fleet fleet;
    for (int32_t r = 0; r < connections; ++r) fleet.Add(0, r, endpoint);
    const ProcessSample connected =
        AwaitSettled(child, idle.open_fds + connections, std::chrono::seconds(60));
    std::vector<Crew> crews = SplitIntoCrews(fleet.ranks(), threads);
    // A rendezvous' sizes: ZeroMQ sizes a connection's buffers by the frames it carried.
    bool ok = RoundTrip(crews, std::string(register_bytes, 'r'));
    const ProcessSample met = AwaitSettled(child, 0, std::chrono::seconds(5));
    // Then small frames, past the 256 messages of one chunk of a ZeroMQ pipe's queue.
    wire::Frame heartbeat;
    heartbeat.mutable_heartbeat();
    const std::string small = wire::Encode(heartbeat);
    for (int i = 0; i < ZmqConnectionCost::kSmallRoundTrips && ok; ++i) ok = RoundTrip(crews, small);
    const ProcessSample busy = AwaitSettled(child, 0, std::chrono::seconds(5));
    cost.ok = ok && connected.open_fds >= idle.open_fds + connections;
    cost.idle_rss = idle.rss_bytes;
    cost.per_idle_connection = double(connected.rss_bytes - idle.rss_bytes) / connections;
    cost.per_connection = double(met.rss_bytes - idle.rss_bytes) / connections;
    cost.per_busy_connection = double(busy.rss_bytes - idle.rss_bytes) / connections;
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return cost;
}

void RunZmqCost(const ScenarioOptions& o, Report* report) {
  // Frames of the scale scenario's sizes for this many ranks: its Register, about its Welcome.
  JobShape shape;
  shape.job = "scale";
  shape.size = o.ranks;
  const ZmqConnectionCost cost =
      MeasureZmqConnectionCost(o.ranks, RegisterFrame(shape, 0).size(), 56 * o.ranks, o.threads);
  if (!cost.ok) return report->Failure("zmq-cost: not every connection was accepted and answered");
  report->Value("zmq_router_rss_per_idle_connection", cost.per_idle_connection, "bytes");
  report->Value("zmq_router_rss_per_connection", cost.per_connection,
                "bytes (after a Register and Welcome of their sizes)");
  report->Value("zmq_router_rss_per_busy_connection", cost.per_busy_connection,
                fmt::format("bytes (and {} small frames each way)", ZmqConnectionCost::kSmallRoundTrips));
}

}  // namespace tutti::bench
