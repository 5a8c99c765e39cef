// Records the control-plane frames of a job: ranks connect here (a ROUTER, as to tuttid), and
// every message is forwarded unchanged to a real tuttid over a DEALER per rank that carries the
// rank's own routing id, and back. Each frame is written, in the order this proxy forwarded it,
// as one line "<ms since start> <in|out> <rank connection index> <hex bytes>" ("in": to tuttid).
// Used once to produce tests/compat/protocol5_job.frames (README.md); kept so that a recording
// can be made again for the next protocol.
//
//   record_proxy <endpoint to bind> <tuttid endpoint> <output file>   (stops on SIGINT/SIGTERM)
#include <csignal>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace {

volatile std::sig_atomic_t g_stop = 0;

std::string Hex(const zmq::message_t& m) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < m.size(); ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BIND TUTTID OUTPUT\n", argv[0]);
    return 2;
  }
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  FILE* out = std::fopen(argv[3], "w");
  if (!out) return 1;
  zmq::context_t context;
  zmq::socket_t ranks(context, zmq::socket_type::router);
  ranks.bind(argv[1]);
  std::fprintf(stderr, "record_proxy listening on %s\n", argv[1]);
  struct Upstream {
    std::string id;
    int index;
    std::unique_ptr<zmq::socket_t> socket;
  };
  std::vector<Upstream> upstreams;
  std::map<std::string, size_t> by_id;
  const auto start = std::chrono::steady_clock::now();
  auto record = [&](const char* direction, int index, const zmq::message_t& m) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    std::fprintf(out, "%lld %s %d %s\n", static_cast<long long>(ms), direction, index,
                 Hex(m).c_str());
    std::fflush(out);
  };
  while (!g_stop) {
    std::vector<zmq::pollitem_t> items{{ranks.handle(), 0, ZMQ_POLLIN, 0}};
    for (auto& u : upstreams) items.push_back({u.socket->handle(), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t id, body;
      (void)ranks.recv(id);
      (void)ranks.recv(body);
      auto found = by_id.find(id.to_string());
      if (found == by_id.end()) {
        auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
        socket->set(zmq::sockopt::routing_id, id.to_string());
        socket->set(zmq::sockopt::linger, 0);
        socket->connect(argv[2]);
        found = by_id.emplace(id.to_string(), upstreams.size()).first;
        upstreams.push_back({id.to_string(), static_cast<int>(upstreams.size()), std::move(socket)});
      }
      Upstream& u = upstreams[found->second];
      record("in", u.index, body);
      u.socket->send(body, zmq::send_flags::none);
    }
    for (size_t i = 1; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      Upstream& u = upstreams[i - 1];
      zmq::message_t body;
      while (u.socket->recv(body, zmq::recv_flags::dontwait)) {
        record("out", u.index, body);
        ranks.send(zmq::buffer(u.id), zmq::send_flags::sndmore);
        ranks.send(body, zmq::send_flags::none);
      }
    }
  }
  std::fclose(out);
  return 0;
}
