// The floor under tutti's control plane: a bare ZeroMQ DEALER -> ROUTER -> DEALER round trip of a
// small message between two processes on loopback TCP, as tuttid and a rank exchange them.
// Prints the median and p90 round trip in microseconds.
#include <sys/prctl.h>
#include <sys/wait.h>

#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <zmq.hpp>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::string endpoint;
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {  // the "coordinator": echo every message back to its sender
    // Dies with the parent: an echo server left behind could answer a later run's port.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    zmq::context_t context(1);
    zmq::socket_t router(context, zmq::socket_type::router);
    router.bind("tcp://127.0.0.1:*");
    std::string bound = router.get(zmq::sockopt::last_endpoint);
    bound.push_back('\0');
    if (write(ready[1], bound.data(), bound.size()) < 0) _exit(1);
    for (int i = 0; i < iters + 1000; ++i) {
      zmq::message_t id, body;
      (void)router.recv(id);
      (void)router.recv(body);
      router.send(id, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
    _exit(0);
  }
  char buffer[256] = {};
  if (read(ready[0], buffer, sizeof(buffer)) <= 0) return 1;
  endpoint = buffer;
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.connect(endpoint);
  std::vector<double> times;
  const std::string payload(64, 'x');  // about the size of a small Announce
  for (int i = 0; i < iters + 1000; ++i) {
    auto start = std::chrono::steady_clock::now();
    dealer.send(zmq::buffer(payload), zmq::send_flags::none);
    zmq::message_t reply;
    (void)dealer.recv(reply);
    if (i >= 1000)
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  waitpid(child, nullptr, 0);
  std::sort(times.begin(), times.end());
  std::printf("zmq dealer-router round trip over loopback tcp: median %.1f us, p90 %.1f us (%d iterations)\n",
              times[times.size() / 2], times[times.size() * 9 / 10], iters);
  return 0;
}
