#include "server/coordinator.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "server/coordinator_core.h"

namespace tutti::server {
namespace {

// Frames read before what they completed is released.
constexpr int kMaxBatch = 256;

// How often tuttid hands its buffered timeline to the kernel.
constexpr auto kTimelineFlush = std::chrono::seconds(1);

// Upper bound on one poll so that a missed wakeup could never stall deadlines for long.
constexpr auto kMaxPoll = std::chrono::milliseconds(1000);

// How long the goodbye frames may take to leave once tuttid stops.
constexpr auto kGoodbyeLinger = std::chrono::milliseconds(1000);

uint64_t RandomEpoch() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

// tuttid's own process in merged timelines, apart from the ranks (process = rank).
constexpr int64_t kTimelinePid = 1 << 20;

std::unique_ptr<Timeline> OpenTimeline(const std::string& path) {
  if (path.empty()) return nullptr;
  auto timeline = std::make_unique<Timeline>(kTimelinePid, "tuttid");
  Status status = timeline->Start(path);
  if (!status.ok()) throw std::runtime_error(status.message());
  return timeline;
}

}  // namespace

struct Coordinator::Impl {
  explicit Impl(const CoordinatorOptions& options)
      : timeline(OpenTimeline(options.timeline)),
        core(options.rendezvous_timeout_ms, RandomEpoch(),
             Job::Policy{options.heartbeat_interval_ms, options.lease_ms, options.stall_warning_ms,
                         options.stall_shutdown_ms, timeline.get()},
             static_cast<size_t>(options.max_jobs)),
        socket(context, zmq::socket_type::router) {
    socket.set(zmq::sockopt::router_mandatory, 1);
    // ZMTP heartbeats tear down connections whose TCP peer vanished; the application lease
    // (Job::Tick) is what declares a rank lost.
    socket.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(options.heartbeat_interval_ms));
    socket.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(options.lease_ms));
    socket.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
    socket.set(zmq::sockopt::linger, 0);
    try {
      socket.bind(options.bind);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot bind " + options.bind + ": " + e.what());
    }
    endpoint = socket.get(zmq::sockopt::last_endpoint);
    wakeup = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeup < 0) throw std::runtime_error("eventfd failed");
  }
  ~Impl() { close(wakeup); }

  void Send(Outbox& out) {
    for (Outgoing& o : out) {
      const std::string payload = wire::Encode(o.frame);
      try {
        socket.send(zmq::buffer(o.peer), zmq::send_flags::sndmore);
        socket.send(zmq::buffer(payload), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        // EHOSTUNREACH: the rank disconnected; its job learns that through liveness, not here.
        spdlog::warn("cannot send to a rank: {}", e.what());
      }
    }
    out.clear();
  }

  // Reads what is waiting (at most kMaxBatch frames, so that answers are never held back for
  // long): everything the batch completes is then released, and fused, together.
  void Receive(Outbox& out) {
    std::vector<zmq::message_t> parts;
    for (int handled = 0; handled < kMaxBatch; ++handled) {
      parts.clear();
      zmq::message_t part;
      if (!socket.recv(part, zmq::recv_flags::dontwait)) return;
      parts.push_back(std::move(part));
      while (parts.back().more()) {
        zmq::message_t next;
        (void)socket.recv(next, zmq::recv_flags::none);
        parts.push_back(std::move(next));
      }
      if (parts.size() != 2) {
        spdlog::warn("refused a message of {} frames", parts.size() - 1);
        Outgoing refusal{parts[0].to_string(), {}};
        refusal.frame.mutable_refusal()->mutable_error()->set_code(
            static_cast<int32_t>(Code::kInvalidArgument));
        refusal.frame.mutable_refusal()->mutable_error()->set_message(
            "a message must be exactly one frame, got " + std::to_string(parts.size() - 1));
        out.push_back(std::move(refusal));
        Send(out);
        continue;
      }
      core.HandleFrame(parts[0].to_string(), parts[1].data(), parts[1].size(), Clock::now(), &out);
      Send(out);
    }
  }

  zmq::context_t context{1};
  std::unique_ptr<Timeline> timeline;  // before core, whose jobs record into it
  CoordinatorCore core;
  zmq::socket_t socket;
  std::string endpoint;
  int wakeup = -1;
};

Coordinator::Coordinator(const CoordinatorOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

Coordinator::~Coordinator() = default;

const std::string& Coordinator::endpoint() const { return impl_->endpoint; }

void Coordinator::Run() {
  Impl& s = *impl_;
  Outbox out;
  auto last_flush = Clock::now();
  zmq::pollitem_t items[] = {{s.socket.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, s.wakeup, ZMQ_POLLIN, 0}};
  while (true) {
    auto now = Clock::now();
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kMaxPoll);
    if (auto deadline = s.core.NextDeadline())
      wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now) +
                            std::chrono::milliseconds(1),
                        std::chrono::milliseconds(0), wait);
    try {
      zmq::poll(items, 2, wait);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // a signal: its handler called Stop(), seen on the next poll
    }
    if (items[1].revents & ZMQ_POLLIN) break;
    s.Receive(out);
    s.core.Flush(&out);
    s.core.Tick(Clock::now(), &out);
    s.Send(out);
    // A service runs for weeks: keep its timeline file readable, at most one write a second.
    if (s.timeline && Clock::now() - last_flush >= kTimelineFlush) {
      s.timeline->Flush();
      last_flush = Clock::now();
    }
  }
  // Tell every rank, so that their requests fail now rather than at the end of their lease. The
  // frames get a bounded time to leave before the socket closes.
  out.clear();
  s.core.GoingAway(&out);
  s.Send(out);
  s.socket.set(zmq::sockopt::linger, static_cast<int>(kGoodbyeLinger.count()));
  spdlog::info("coordinator stopping: told the ranks of {} jobs", s.core.job_count());
}

void Coordinator::Stop() {
  uint64_t one = 1;
  // write(2) is async-signal-safe; a full counter already means "stop".
  [[maybe_unused]] ssize_t n = write(impl_->wakeup, &one, sizeof(one));
}

}  // namespace tutti::server
